"""The VM generation an Azure GPU size boots (``vm_sizes.yaml``, each entry with its
source): a Generation-2-only size cannot boot a V1 image definition."""

from __future__ import annotations

import fnmatch
import functools
from pathlib import Path

from imagectl.core.yamlfast import load_data

DATA = Path(__file__).with_name("vm_sizes.yaml")


@functools.cache
def _gen2_only() -> tuple[tuple[str, str], ...]:
    return tuple((str(e["size"]), str(e["source"])) for e in load_data(DATA)["gen2_only"])


def gen2_only(size: str) -> str | None:
    """The source saying ``size`` boots Generation 2 only; None when no entry says so."""
    return next((src for pat, src in _gen2_only() if fnmatch.fnmatchcase(size, pat)), None)
