"""The validation shape table (images/catalog/shapes.yaml: shape -> cloud, GPU, count,
hardware facts) and the GPU table's rows (images/compat/gpus.yaml) as the validator reads
them: the one loader of each on this side, used by the validator's expectations and checks
and by the controller's lint. It lives on the validator side because a fleet node's validator must
not import controller code."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

from imagectl.core.errors import UserError
from imagectl.core.gpu_names import GpuNames, build_names
from imagectl.core.yamlfast import loads as load_yaml


@dataclass(frozen=True)
class Shape:
    name: str
    cloud: str
    gpu: str | None
    gpu_count: int
    source: str
    hardware: dict[str, Any] = field(default_factory=dict)


# Shape tables beside images/catalog/shapes.yaml: a cloud registered from outside imagectl
# brings its shapes in its own file (``CloudSpec.shapes_file``; the controller's cloud
# registry adds it when it loads the cloud). Same format, merged in; a shape named twice
# is an error.
_EXTRA_FILES: list[Path] = []


def add_shape_file(path: Path) -> None:
    """Merge the shape table ``path`` into every later ``shape_rows``."""
    if path not in _EXTRA_FILES:
        _EXTRA_FILES.append(path)


def shape_rows(catalog_dir: Path) -> dict[str, dict[str, Any]]:
    """Every row of ``catalog_dir/shapes.yaml`` and of the added shape files, as written;
    a clear error for a file that cannot be read or parsed, or a shape named twice."""
    return _rows(catalog_dir, tuple(_EXTRA_FILES))


@lru_cache(maxsize=8)
def _rows(catalog_dir: Path, extra: tuple[Path, ...]) -> dict[str, dict[str, object]]:
    rows = dict(_table(catalog_dir / "shapes.yaml", "shapes", "shape table"))
    for path in extra:
        more = _table(path, "shapes", "shape table")
        twice = sorted(set(more) & set(rows))
        if twice:
            raise UserError(
                f"{path}: shape(s) {', '.join(twice)} are already in the shape table",
                hint="Name each shape once across images/catalog/shapes.yaml and the "
                "clouds' own shape files",
            )
        rows.update(more)
    return rows


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


def load_shapes(catalog_dir: Path) -> dict[str, Shape]:
    """The table as typed shapes (cloud, GPU, count, source; the rest is hardware)."""
    return _shapes(catalog_dir, tuple(_EXTRA_FILES))


@lru_cache(maxsize=8)
def _shapes(catalog_dir: Path, extra: tuple[Path, ...]) -> dict[str, Shape]:
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
    """The row of the GPU ``sku`` names: a SKU key, an nvidia-smi name or a product name,
    through the name table ``imagectl compat check --gpu`` reads too
    (``imagectl.core.gpu_names``); a family name of several SKUs is refused naming them."""
    path = compat_dir / "gpus.yaml"
    gpus = gpu_rows(compat_dir)
    names = _gpu_names(compat_dir)
    skus = names.lookup(sku)
    if not skus:
        close = names.suggest(sku)
        mean = f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise UserError(
            f"unknown GPU '{sku}'",
            where=str(path),
            hint=f"{mean}Known GPUs: " + ", ".join(sorted(gpus)) + " (or their nvidia-smi "
            "names, gpus.yaml nvml_names, and the product names of gpu_names.yaml)",
        )
    if len(skus) > 1:
        raise UserError(
            f"'{sku}' names {len(skus)} GPUs ({', '.join(skus)}): the host has one model",
            hint="Pass the one it has (its nvidia-smi name, or one of those SKUs)",
        )
    name = skus[0]
    row = gpus[name]
    if not isinstance(row, dict):
        raise UserError(f"{path}: malformed GPU table: the row of {name} is not a mapping")
    return {"sku": name, **row}


class PcieLink(TypedDict, total=False):
    """A GPU's PCIe link as the GPU table gives it (empty: the table gives none)."""

    gen: int
    width: int
    source: str


def gpu_pcie(compat_dir: Path, sku: str | None) -> PcieLink:
    """The PCIe link (gen, width, source) the GPU table gives the SKU ``sku`` (its one copy,
    read by gpu.pcie.link_max through a shape's expectations and by load.pcie_link through
    the floors); {} for a SKU the table gives none (or no SKU)."""
    row = gpu_rows(compat_dir).get(sku or "")
    link = row.get("pcie") if isinstance(row, dict) else None
    if not link:
        return PcieLink()
    path = compat_dir / "gpus.yaml"
    ok = (
        isinstance(link, dict)
        and all(isinstance(link.get(k), int) and link[k] > 0 for k in ("gen", "width"))
        and isinstance(link.get("source"), str)
        and link["source"].strip()
    )
    if not ok:
        raise UserError(
            f"{path}: malformed GPU table: {sku}.pcie must be {{gen: N, width: N, source: ...}} "
            f"with positive whole numbers and a source, not {link!r}",
            hint="Copy the host interface from the GPU's datasheet and cite it",
        )
    return PcieLink(gen=int(link["gen"]), width=int(link["width"]), source=str(link["source"]))


def gpu_power(compat_dir: Path, sku: str | None) -> dict[str, Any]:
    """The power range (max_w, min_w where NVIDIA makes the TDP configurable, source) the GPU
    table gives the SKU ``sku``; {} for a SKU the table gives none."""
    row = gpu_rows(compat_dir).get(sku or "")
    power = row.get("power") if isinstance(row, dict) else None
    if not power:
        return {}
    watts = [power.get("max_w"), power.get("min_w", power.get("max_w"))]
    ok = (
        all(isinstance(w, int | float) and not isinstance(w, bool) and w > 0 for w in watts)
        and watts[1] <= watts[0]
        and isinstance(power.get("source"), str)
        and power["source"].strip()
    )
    if not ok:
        raise UserError(
            f"{compat_dir / 'gpus.yaml'}: malformed GPU table: {sku}.power must be {{max_w: W, "
            f"min_w: W (optional, at most max_w), source: ...}}, not {power!r}",
            hint="Copy the board's TDP (or its configurable range) from NVIDIA's datasheet",
        )
    out = {"max_w": float(watts[0]), "source": str(power["source"])}
    if "min_w" in power:
        out["min_w"] = float(watts[1])
    return out


@lru_cache(maxsize=8)
def _gpu_names(compat_dir: Path) -> GpuNames:
    """The GPU names of ``compat_dir``: gpus.yaml's SKUs and nvml_names, gpu_names.yaml's."""
    gpus = gpu_rows(compat_dir)
    aliases_file = compat_dir / "gpu_names.yaml"
    aliases = _table(aliases_file, "names", "GPU name table") if aliases_file.is_file() else {}
    nvml = {
        str(k): [str(n) for n in (v.get("nvml_names") or ())] if isinstance(v, dict) else []
        for k, v in gpus.items()
    }
    try:
        return build_names(nvml, aliases)
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"malformed GPU name table: {exc}", where=str(aliases_file)) from None
