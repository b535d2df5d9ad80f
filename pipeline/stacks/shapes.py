"""The validation shape catalog (images/catalog/shapes.yaml): shape -> cloud, GPU, count."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from imagectl.errors import UserError


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
    from ruamel.yaml import YAML

    path = catalog_dir / "shapes.yaml"
    try:
        doc = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read the shape catalog {path}: {exc.strerror}") from exc
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
