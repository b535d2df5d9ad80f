"""The validation shape table (images/catalog/shapes.yaml: shape -> cloud, GPU, count,
hardware facts) and the GPU table's rows (images/compat/gpus.yaml) as the validator reads
them: the one loader of each on this side, used by the validator's expectations and checks
and by the controller's lint. It lives on the validator side because a fleet node's validator must
not import controller code."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml


@dataclass(frozen=True)
class Shape:
    name: str
    cloud: str
    gpu: str | None
    gpu_count: int
    source: str
    hardware: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=8)
def shape_rows(catalog_dir: Path) -> dict[str, dict[str, Any]]:
    """Every row of ``catalog_dir/shapes.yaml`` as written; a clear error for a file that
    cannot be read or parsed."""
    return _table(catalog_dir / "shapes.yaml", "shapes", "shape table")


def _table(path: Path, key: str, what: str) -> dict[str, Any]:
    """The ``key`` mapping of the YAML file ``path`` (the ``what``, for errors)."""
    try:
        doc = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read the {what} {path}: {exc.strerror}") from exc
    except Exception as exc:
        raise UserError(f"{path}: malformed {what}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
        raise UserError(f"{path}: malformed {what}: no '{key}' mapping")
    rows: dict[str, Any] = doc[key]
    return rows


@lru_cache(maxsize=8)
def load_shapes(catalog_dir: Path) -> dict[str, Shape]:
    """The table as typed shapes (cloud, GPU, count, source; the rest is hardware)."""
    out = {}
    for name, row in shape_rows(catalog_dir).items():
        entry = dict(row)
        out[name] = Shape(
            name=name,
            cloud=entry.pop("cloud"),
            gpu=entry.pop("gpu"),
            gpu_count=int(entry.pop("gpu_count")),
            source=entry.pop("source"),
            hardware=entry,
        )
    return out


@lru_cache(maxsize=8)
def gpu_rows(compat_dir: Path) -> dict[str, Any]:
    """Every row of ``compat_dir/gpus.yaml`` (the compatibility engine's GPU table: NVML
    names and memory, NVSwitch, architecture, source), read here so the validator needs
    no controller code."""
    return _table(compat_dir / "gpus.yaml", "gpus", "GPU table")


def gpu_row(compat_dir: Path, sku: str) -> dict[str, Any]:
    """The SKU's row of the GPU table, the SKU matched case-insensitively."""
    path = compat_dir / "gpus.yaml"
    gpus = gpu_rows(compat_dir)
    folded = {str(k).lower(): (str(k), v) for k, v in gpus.items()}
    if sku.lower() not in folded:
        raise UserError(
            f"unknown GPU '{sku}'", where=str(path), hint="Known GPUs: " + ", ".join(sorted(gpus))
        )
    name, row = folded[sku.lower()]
    if not isinstance(row, dict):
        raise UserError(f"{path}: malformed GPU table: the row of {name} is not a mapping")
    return {"sku": name, **row}
