"""Floors and NCCL settings per interconnect for collectives across nodes.

``validators/data/interconnect_floors.yaml`` is the one source: each interconnect (EFA at
3,200 Gbps, InfiniBand NDR 8 x 400 Gb/s, ...) with the shapes that have it, its per-node
line rate and source, and the busbw floor the project derives from it (the policy and its
authority are in the file); the NCCL environment each fabric runs with. ``imagectl
validate-image --nodes N`` judges the cross-node all_reduce with ``judge_busbw`` and records
``nccl_env_for`` in the fabric result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.collectives.arithmetic import OPS
from imagectl.validators.registry import Runs, declare
from imagectl.validators.results import Action

FILE = "data/interconnect_floors.yaml"

# The fabric run's checks (the controller's receipt: imagectl.validation.fabric.receipt).
for _op in OPS:
    declare(
        f"fabric.collective.{_op}",
        f"{_op} across the nodes: values and bus bandwidth against the interconnect",
        runs=Runs.RANKS, action=Action.NONE,
    )  # fmt: skip
declare(
    "fabric.attribution", "A failure across nodes is attributed to a node or to the fabric",
    runs=Runs.RANKS, action=Action.DRAIN,
)  # fmt: skip


def _path() -> str:
    return str(resources.files("imagectl.validators").joinpath(FILE))


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    path = _path()
    try:
        with open(path, encoding="utf-8") as fh:
            data = load_yaml(fh.read())
    except Exception as exc:  # parse errors carry the line
        raise UserError(f"cannot read the interconnect floors: {exc}", where=path) from exc
    missing = [
        f"{name}.{op}"
        for name, entry in (data.get("interconnects") or {}).items()
        for op, gate in (entry.get("ops") or {}).items()
        if not gate.get("source")
    ]
    missing += [
        f"nccl_env.{k}" for k, v in (data.get("nccl_env") or {}).items() if not v.get("source")
    ]
    if missing:
        raise UserError(
            f"interconnect entries without a source: {', '.join(missing)}",
            where=path,
            hint="Every floor and setting needs its source (a vendor document, or "
            "'imagectl policy: ...')",
        )
    return data


@dataclass(frozen=True)
class Gate:
    op: str
    at_bytes: int
    min_busbw_gbps: float
    source: str


@dataclass(frozen=True)
class Interconnect:
    """One interconnect of the data file (``name`` None: the shape has none listed)."""

    name: str | None
    fabric: str | None
    title: str
    line_rate_gbps: float | None = None
    gates: dict[str, Gate] = field(default_factory=dict)


def interconnect_for(shape: str | None) -> Interconnect:
    """The interconnect the shape's nodes share (none listed: a title saying so, no floor)."""
    for name, entry in (load().get("interconnects") or {}).items():
        if shape in (entry.get("shapes") or []):
            gates = {
                op: Gate(op, int(g["at_bytes"]), float(g["min_busbw_gbps"]), str(g["source"]))
                for op, g in (entry.get("ops") or {}).items()
            }
            return Interconnect(
                name, entry.get("fabric"), entry["title"], entry.get("line_rate_gbps"), gates
            )
    return Interconnect(
        None, None, f"{shape or 'this shape'}: no interconnect floor listed ({FILE})"
    )


def nccl_env_for(fabric: str | None) -> dict[str, str]:
    """NCCL's settings for the fabric (without their source), empty when none is listed."""
    entry = (load().get("nccl_env") or {}).get(fabric or "") or {}
    return {k: str(v) for k, v in entry.items() if k != "source"}


def nccl_env_source(fabric: str | None) -> str | None:
    entry = (load().get("nccl_env") or {}).get(fabric or "") or {}
    return entry.get("source")


def policy() -> dict[str, object]:
    return dict(load().get("policy") or {})


def pair_slow_fraction() -> float:
    return float((load().get("pair_slow_fraction") or {}).get("value", 0.8))


@dataclass(frozen=True)
class BusbwVerdict:
    """The largest gated size's busbw against its floor (``ok`` None: no floor applies)."""

    ok: bool | None
    measured_gbps: float | None
    floor_gbps: float | None
    at_bytes: int | None
    source: str | None
    why: str


def judge_busbw(
    ic: Interconnect, op: str, sizes: list[dict[str, Any]], device: str
) -> BusbwVerdict:
    """``sizes``: the collective check's ``details["sizes"]`` (bytes, busbw_gbps, ok)."""
    best = max(sizes, key=lambda s: int(s.get("bytes") or 0), default=None)
    measured = float(best["busbw_gbps"]) if best and best.get("busbw_gbps") is not None else None
    if device != "cuda":
        return BusbwVerdict(None, measured, None, None, None, "not applicable on cpu (gloo)")
    gate = ic.gates.get(op)
    if gate is None:
        return BusbwVerdict(None, measured, None, None, None, ic.title)
    gated = [s for s in sizes if int(s.get("bytes") or 0) >= gate.at_bytes]
    if not gated:
        why = f"no size >= {gate.at_bytes} B was run: the floor was not exercised"
        return BusbwVerdict(False, measured, gate.min_busbw_gbps, gate.at_bytes, gate.source, why)
    low = min(float(s.get("busbw_gbps") or 0.0) for s in gated)
    ok = low >= gate.min_busbw_gbps
    why = f"{low:.1f} GB/s {'>=' if ok else '<'} floor {gate.min_busbw_gbps:g} GB/s ({ic.title})"
    return BusbwVerdict(ok, low, gate.min_busbw_gbps, gate.at_bytes, gate.source, why)
