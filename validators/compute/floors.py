"""Performance floors per GPU SKU and shape, from ``validators/data/floors.yaml``.

The one source of truth for the smoke-test and collective thresholds; see the file's
header for the policy and units. Shape entries are merged over their GPU's entry.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import imagectl.images
from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.shapes import gpu_pcie

FLOORS_FILE = "data/floors.yaml"


def _source_path() -> str:
    return str(resources.files("imagectl.validators").joinpath(FLOORS_FILE))


@lru_cache(maxsize=1)
def load_floors() -> dict[str, Any]:
    path = _source_path()
    try:
        with open(path, encoding="utf-8") as fh:
            data = load_yaml(fh.read())
    except Exception as exc:  # parse errors carry the line
        raise UserError(f"cannot read the floors table: {exc}", where=path) from exc
    problems = list(_unsourced(data, "floors"))
    if problems:
        raise UserError(
            f"floors without a source: {', '.join(problems)}",
            where=path,
            hint="Every floor needs a source (measurement, DCGM/AzHC figure or derivation)",
        )
    return data


def _unsourced(node: object, where: str) -> list[str]:
    """Paths of numeric thresholds (min, max, min_busbw_gbps, gen, width) without a source."""
    found: list[str] = []
    if isinstance(node, dict):
        keys = {"min", "max", "min_busbw_gbps", "gen", "width"}
        if keys & set(node) and not node.get("source"):
            found.append(where)
        for key, value in node.items():
            found += _unsourced(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _unsourced(value, f"{where}[{i}]")
    return found


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            gates = {g["at_bytes"]: g for g in out[key]}
            gates.update({g["at_bytes"]: g for g in value})
            out[key] = [gates[k] for k in sorted(gates)]
        else:
            out[key] = copy.deepcopy(value)
    return out


def floors_for(gpu: str | None, shape: str | None = None) -> dict[str, Any]:
    """The merged floors for a GPU SKU and (optionally) a shape; {} when none are defined.
    ``pcie`` is the GPU table's link for the SKU (images/compat/gpus.yaml, the one copy
    gpu.pcie.link_max reads too), not a floor of this file."""
    data = load_floors()
    result = copy.deepcopy((data.get("gpus") or {}).get(gpu or "", {}))
    if shape and shape in (data.get("shapes") or {}):
        result = _merge(result, data["shapes"][shape])
    pcie = gpu_pcie(_compat_dir(), gpu)
    if pcie:
        result["pcie"] = pcie
    return result


def _compat_dir() -> Path:
    return Path(imagectl.images.__file__).resolve().parent / "compat"


def collective_gates(floors: dict[str, Any], world_size: int, op: str) -> list[dict[str, Any]]:
    """Gates for ``op`` at ``world_size`` ranks, sorted by ``at_bytes``."""
    per_world = (floors.get("collectives") or {}).get(world_size) or {}
    return sorted(per_world.get(op) or [], key=lambda g: g["at_bytes"])


def gate_for_size(gates: list[dict[str, Any]], size: int) -> dict[str, Any] | None:
    """The gate that applies to a message of ``size`` bytes (the largest at_bytes <= size)."""
    chosen = None
    for gate in gates:
        if size >= gate["at_bytes"]:
            chosen = gate
    return chosen
