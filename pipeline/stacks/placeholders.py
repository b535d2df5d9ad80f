"""Documentation placeholder ids in a stack (images/compat/placeholders.yaml): the zero
Azure subscription, AWS's example accounts and organization, an example GCP project, a
principal at example.com. Refused (PLACEHOLDER, an error) unless the stack says it is an
example (``example: true``: a warning naming each one to replace)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data
from imagectl.stacks.findings import Finding
from imagectl.stacks.schema import Stack

RULE = "PLACEHOLDER"


@dataclass(frozen=True)
class Placeholder:
    id: str
    cloud: str  # aws | gcp | azure | any
    pattern: re.Pattern[str]
    what: str
    fix: str
    source: str


@lru_cache(maxsize=4)
def load_placeholders(compat_dir: Path) -> tuple[Placeholder, ...]:
    path = compat_dir / "placeholders.yaml"
    doc = load_data(path)
    try:
        return tuple(
            Placeholder(
                id=p["id"],
                cloud=p["cloud"],
                pattern=re.compile(p["pattern"]),
                what=p["what"],
                fix=p["fix"],
                source=p["source"],
            )
            for p in doc["placeholders"]
        )
    except (KeyError, TypeError, re.error) as exc:
        raise UserError(
            f"{path}: an entry is malformed ({exc}); each needs id, cloud, pattern, what, "
            "fix and source"
        ) from exc


def _strings(
    data: object, loc: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield (*loc, key), str(key)
            yield from _strings(value, (*loc, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _strings(value, (*loc, i))
    elif isinstance(data, str):
        yield loc, data


def placeholder_findings(stack: Stack, compat_dir: Path) -> Iterator[Finding]:
    """Each placeholder id under ``clouds.<cloud>``, once per field."""
    known = load_placeholders(compat_dir)
    severity = "warning" if stack.example else "error"
    for cloud, settings in stack.clouds.enabled().items():
        data = settings.model_dump(mode="json")
        seen: set[tuple[str | int, ...]] = set()
        for loc, text in _strings(data, ("clouds", cloud)):
            for p in known:
                if p.cloud not in (cloud, "any") or loc in seen or not p.pattern.search(text):
                    continue
                seen.add(loc)
                if stack.example:
                    message = (
                        f"'{text}' is {p.what}: this stack is an example (example: true); "
                        "replace it before running on your accounts"
                    )
                else:
                    message = (
                        f"'{text}' is {p.what}, not an id of yours: the cloud would refuse "
                        "it after a build was paid for"
                    )
                yield Finding(
                    RULE,
                    severity,
                    loc,
                    message,
                    p.fix
                    if stack.example
                    else f"{p.fix}; or, for a documentation stack, say so with `example: true`",
                    p.source,
                )
