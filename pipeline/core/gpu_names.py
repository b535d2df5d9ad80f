"""GPU names as people and tools spell them -> the SKU keys of ``images/compat/gpus.yaml``.

Accepted: a SKU key, an ``nvml_names`` entry (what ``nvidia-smi --query-gpu=name`` prints),
and a name of ``images/compat/gpu_names.yaml`` (NVIDIA's product names, with sources; a
family name such as ``H100`` stands for several SKUs). Names compare without case, spaces,
hyphens or underscores. An unknown name gets the closest known spellings as a suggestion.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def fold(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidiah10080gbhbm3"``: the form names compare in."""
    return re.sub(r"[\s_\-]+", "", name).lower()


@dataclass(frozen=True)
class GpuNames:
    """folded name -> (its spelling, the SKUs it names), SKU keys first."""

    names: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def lookup(self, name: str) -> tuple[str, ...] | None:
        hit = self.names.get(fold(name))
        return hit[1] if hit else None

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """The spellings closest to ``name`` (difflib's ratio >= 0.6 on folded names)."""
        close = difflib.get_close_matches(fold(name), list(self.names), n=n, cutoff=0.6)
        return [self.names[c][0] for c in close]


def build_names(skus: Mapping[str, Iterable[str]], aliases: Mapping[str, Any] | None) -> GpuNames:
    """From gpus.yaml (SKU -> its nvml_names) and gpu_names.yaml's ``names``."""
    names: dict[str, tuple[str, tuple[str, ...]]] = {}
    for sku in skus:
        names.setdefault(fold(sku), (sku, (sku,)))
    for sku, nvml in skus.items():
        for spelled in nvml:
            names.setdefault(fold(spelled), (spelled, (sku,)))
    for spelled, entry in (aliases or {}).items():
        members = tuple(str(s) for s in entry["skus"])
        unknown = [s for s in members if s not in skus]
        if unknown:
            raise ValueError(f"gpu_names.yaml: {spelled!r} names unknown SKU(s) {unknown}")
        names.setdefault(fold(str(spelled)), (str(spelled), members))
    return GpuNames(names)
