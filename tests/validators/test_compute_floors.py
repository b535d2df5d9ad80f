"""The floors table: sourced numbers, keys that exist in the catalogues, shape overrides,
and the GPU-side gating of collective busbw (the CPU suite cannot reach those branches)."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from imagectl.validators.collectives.events import RankState
from imagectl.validators.collectives.launch import Plan, RunReport
from imagectl.validators.collectives.verdicts import build_checks
from imagectl.validators.compute.floors import (
    collective_gates,
    floors_for,
    gate_for_size,
    load_floors,
)
from imagectl.validators.results import Action, Outcome

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30


def catalogue(name):
    return YAML(typ="safe").load((ROOT / "images" / name).read_text())


def test_every_key_is_a_known_gpu_or_shape_and_every_number_has_a_source():
    data = load_floors()  # raises on an unsourced number
    gpus = catalogue("compat/gpus.yaml")["gpus"]
    shapes = catalogue("catalog/shapes.yaml")["shapes"]
    assert set(data["gpus"]) <= set(gpus)
    assert set(data["shapes"]) <= set(shapes)
    for sku, entry in data["gpus"].items():
        for dtype, floor in (entry.get("gemm_tflops") or {}).items():
            assert floor["min"] > 0 and floor["source"], (sku, dtype)


def test_shape_override_adds_its_gate_over_the_gpu_entry():
    gpu_only = collective_gates(floors_for("H100-SXM-80GB"), 8, "all_reduce")
    azure = collective_gates(
        floors_for("H100-SXM-80GB", "Standard_ND96isr_H100_v5"), 8, "all_reduce"
    )
    assert [g["at_bytes"] for g in gpu_only] == [GiB]
    assert [g["at_bytes"] for g in azure] == [GiB, 16 * GiB]
    assert gate_for_size(azure, 16 * GiB)["min_busbw_gbps"] == 460
    assert gate_for_size(azure, 4 * GiB)["min_busbw_gbps"] == 277
    assert gate_for_size(azure, GiB // 2) is None
    assert floors_for("no-such-gpu") == {}


def report_with(busbw_by_size, world=8):
    """A finished 8-GPU all_reduce run whose times give the wanted busbw per size."""
    factor = 2 * (world - 1) / world
    state = RankState(0, pid=1, host="h", started_t=0.0, rendezvous_t=1.0, joined_t=2.0)
    state.first_collective_t, state.done_t = 2.5, 9.0
    for size, busbw in busbw_by_size.items():
        t_us = size * factor / (busbw * 1e9) * 1e6
        state.exits.append(
            {
                "op": "all_reduce",
                "requested_bytes": size,
                "bytes": size,
                "time_us": t_us,
                "ok": True,
                "rank": 0,
            }
        )
    plan = Plan(
        device="cuda", ops=["all_reduce"], sizes={"all_reduce": list(busbw_by_size)}, nranks=1
    )
    return RunReport(plan, world, [0], {0: state}, 0.0, 9.0, {0: 0}, None, {})


def test_gpu_busbw_below_the_floor_fails_at_the_gated_size_only():
    floors = floors_for("H100-SXM-80GB", "Standard_ND96isr_H100_v5")
    slow_small = report_with({1 << 20: 20.0, GiB: 300.0, 16 * GiB: 470.0})
    check = build_checks(slow_small, device="cuda", floors=floors, gpu="H100-SXM-80GB")[1]
    assert check.outcome is Outcome.PASS, check.message  # 1 MiB is latency-bound: not gated
    assert check.expected == 460 and abs(check.measured - 470.0) < 1e-3
    assert [r["gate"] for r in check.details["sizes"]] == [False, True, True]
    slow_large = report_with({GiB: 300.0, 16 * GiB: 430.0})
    check = build_checks(slow_large, device="cuda", floors=floors, gpu="H100-SXM-80GB")[1]
    assert check.outcome is Outcome.FAIL and check.action is Action.DRAIN
    assert str(16 * GiB) in check.message and "460" in check.message


def test_gpu_without_floors_is_recorded_but_not_gated():
    check = build_checks(report_with({GiB: 100.0}), device="cuda", floors={}, gpu="A10G")[1]
    assert check.outcome is Outcome.WARN and "no floor for A10G" in check.message
