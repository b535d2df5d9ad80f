"""The validation shape catalog (images/catalog/shapes.yaml): shape -> cloud, GPU, count."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Shape:
    name: str
    cloud: str
    gpu: str | None
    gpu_count: int
    source: str
    hardware: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=4)
def load_shapes(catalog_dir: Path) -> dict[str, Shape]:
    from imagectl.yamlfast import load_data

    doc = load_data(catalog_dir / "shapes.yaml")
    out = {}
    for name, entry in doc["shapes"].items():
        entry = dict(entry)
        out[name] = Shape(
            name=name,
            cloud=entry.pop("cloud"),
            gpu=entry.pop("gpu"),
            gpu_count=int(entry.pop("gpu_count")),
            source=entry.pop("source"),
            hardware=entry,
        )
    return out
