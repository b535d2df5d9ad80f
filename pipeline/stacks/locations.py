"""Region, zone and storage location names each cloud accepts (images/compat/regions.yaml,
one top-level key per cloud), and the stack fields that name one: a typo (``us-eats-2``)
or a name the cloud does not have (``europe`` as a Cloud Storage location) is found before
any build, with the nearest known name suggested.

Which fields name a location, and what the cloud's names are, is the cloud's own
knowledge: a check of each cloud's section (``stacks.sections.CloudSection.checks``, in
``imagectl.clouds.<name>.stack``) compares its fields with its part of regions.yaml and
reports each unknown one with ``unknown_location``. A cloud whose regions are folders (the
local one) has no such check.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data
from imagectl.stacks.findings import Finding

RULE = "LOCATION-UNKNOWN"
Loc = tuple[str | int, ...]


@lru_cache(maxsize=4)
def _regions_file(compat_dir: Path) -> Mapping[str, Any]:
    doc = load_data(compat_dir / "regions.yaml")
    return doc if isinstance(doc, dict) else {}


def cloud_locations(compat_dir: Path, cloud: str, *keys: str) -> dict[str, Any]:
    """The cloud's part of ``images/compat/regions.yaml``; UserError naming the file when
    it lacks the cloud or one of ``keys`` (each with its ``source``)."""
    path = compat_dir / "regions.yaml"
    part = _regions_file(compat_dir).get(cloud)
    missing = [k for k in ("source", *keys) if not isinstance(part, dict) or k not in part]
    if missing:
        raise UserError(
            f"{path} lacks {', '.join(f'{cloud}.{k}' for k in missing)}: each cloud's "
            "location names are listed there under the cloud's name, with their source"
        )
    assert isinstance(part, dict)
    return part


def nearest(name: str, known: frozenset[str] | set[str]) -> str | None:
    found = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_location(
    loc: Loc,
    name: str,
    kind: str,
    known: frozenset[str],
    source: str,
    *,
    suggestion: str | None = None,
    also: str = "",
) -> Finding:
    near = suggestion or nearest(name, known)
    hint = f"did you mean '{near}'? " if near else ""
    return Finding(
        RULE,
        "error",
        loc,
        f"'{name}' is not {kind}",
        f"{hint}{also}use a name from images/compat/regions.yaml (add a new one there "
        "with its source)",
        source,
    )


def unknown_locations(
    names: Iterable[tuple[Loc, str]], kind: str, known: frozenset[str], source: str
) -> Iterator[Finding]:
    """``unknown_location`` for each of ``names`` (a field's place in the stack, the name
    it holds) that is not in ``known``, in their order."""
    for loc, name in names:
        if name not in known:
            yield unknown_location(loc, name, kind, known, source)


def target_regions(cloud: str, regions: Sequence[str]) -> Iterator[tuple[Loc, str]]:
    """A cloud section's ``regions``, each with its place (``clouds.<cloud>.regions[i]``)."""
    return ((("clouds", cloud, "regions", i), r) for i, r in enumerate(regions))
