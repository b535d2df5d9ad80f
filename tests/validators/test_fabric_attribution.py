"""Multi-node judgement without hosts: the interconnect floors (validators/data/
interconnect_floors.yaml), one run's verdict from its nodes' measurements, and the
attribution of a failure to a node or to the fabric (imagectl.validation.fabric).

Expected verdicts come from the rules as written down (the attribution module's
docstring, the floors file's policy), not from what the code answered: a p5 pair's
all_reduce at 150 GB/s is under half of 3,200 Gbps (400 GB/s) and fails; at 300 GB/s it
passes; on CPU no floor applies.
"""

from __future__ import annotations

from typing import Any

import pytest

from imagectl.validation.fabric.attribution import FABRIC, NODE, PASS, attribute
from imagectl.validation.fabric.judge import NodeRun, RunVerdict, judge_run
from imagectl.validators.collectives.interconnect import (
    interconnect_for,
    load,
    nccl_env_for,
    pair_slow_fraction,
)

GiB = 1 << 30


def _part(busbw: float, *, device: str = "cuda", rdzv: str = "pass", outcome: str = "pass",
          failure: str | None = None) -> dict[str, Any]:  # fmt: skip
    details: dict[str, Any] = {"sizes": [{"bytes": 1 << 20, "busbw_gbps": busbw / 4},
                                         {"bytes": GiB, "busbw_gbps": busbw}]}  # fmt: skip
    if failure:
        details["failure"] = failure
    return {
        "kind": "imagectl.fabric-node",
        "device": device,
        "nccl_env": {"FI_PROVIDER": "efa"},
        "checks": [
            {"id": "collective.rendezvous", "outcome": rdzv, "message": "rendezvous"},
            {"id": "collective.all_reduce", "outcome": outcome, "measured": busbw,
             "message": "values", "details": details},
        ],
    }  # fmt: skip


def _runs(*busbw: float, device: str = "cuda") -> list[NodeRun]:
    return [NodeRun(f"i-{n}", f"10.0.0.{n}", _part(b, device=device)) for n, b in enumerate(busbw)]


def test_every_floor_and_nccl_setting_has_a_source_and_the_policy_is_labelled() -> None:
    data = load()
    assert data["policy"]["authority"] == "imagectl" and data["policy"]["source"]
    for name, entry in data["interconnects"].items():
        for op, gate in entry["ops"].items():
            assert gate["source"], (name, op)
            # a floor the project derives says so, and it is the policy's fraction of the
            # line rate (Gbit/s -> GB/s: / 8)
            assert gate["source"].startswith("imagectl policy")
            line_gbytes = entry["line_rate_gbps"] / 8
            assert gate["min_busbw_gbps"] == pytest.approx(data["policy"]["fraction"] * line_gbytes)
    assert nccl_env_for("efa")["FI_PROVIDER"] == "efa"
    assert nccl_env_for("infiniband")["NCCL_IB_HCA"].startswith("mlx5")
    assert nccl_env_for(None) == {}


def test_p5_pair_below_half_the_line_rate_fails_with_the_source() -> None:
    ic = interconnect_for("p5.48xlarge")
    assert ic.fabric == "efa" and ic.line_rate_gbps == 3200
    slow = judge_run(_runs(150.0, 310.0), ic)  # the slowest node's view decides
    assert not slow.ok and slow.busbw_gbps == 150.0
    assert slow.floor is not None and slow.floor.floor_gbps == 200
    assert "3,200 Gbps" in str(slow.floor.source) and "imagectl policy" in str(slow.floor.source)
    assert any("below" in r or "<" in r for r in slow.reasons)
    healthy = judge_run(_runs(300.0, 310.0), ic)
    assert healthy.ok and healthy.busbw_gbps == 300.0


def test_cpu_runs_have_no_floor_and_pass_on_exact_values() -> None:
    run = judge_run(_runs(0.05, 0.04, device="cpu"), interconnect_for("p5.48xlarge"))
    assert run.ok and run.floor is not None and run.floor.ok is None
    assert "not applicable on cpu" in run.floor.why


def test_a_node_that_never_joined_or_sent_nothing_is_named() -> None:
    ic = interconnect_for("Standard_ND96isr_H100_v5")
    runs = [NodeRun("vm-a", "10.1.0.4", _part(300.0)),
            NodeRun("vm-b", "10.1.0.5", None, "no result (unreachable)")]  # fmt: skip
    run = judge_run(runs, ic)
    assert not run.ok and run.named_nodes == ["vm-b"]
    att = attribute({"vm-a": [], "vm-b": []}, run)
    assert att.verdict == NODE and att.nodes == ["vm-b"]


def _verdict(nodes: tuple[str, ...], busbw: float, ok: bool) -> RunVerdict:
    return RunVerdict(nodes, ok, busbw, None, [] if ok else [f"{busbw} GB/s < floor"])


def test_a_node_failing_its_own_checks_is_at_fault_whatever_the_run_did() -> None:
    att = attribute({"a": [], "b": ["fabric.ib.port_state"]}, _verdict(("a", "b"), 300, True))
    assert att.verdict == NODE and att.nodes == ["b"]
    assert "fabric.ib.port_state" in att.reasons[0]


def test_healthy_nodes_slow_together_is_the_fabric() -> None:
    att = attribute({"a": [], "b": []}, _verdict(("a", "b"), 120, False))
    assert att.verdict == FABRIC and att.nodes == []


def test_the_node_slow_in_every_pair_is_at_fault_when_other_pairs_are_fine() -> None:
    # ring pairs a-b, b-c, c-a: c's two pairs are slow, a-b is healthy -> c
    pairs = {("a", "b"): _verdict(("a", "b"), 320, True),
             ("b", "c"): _verdict(("b", "c"), 140, False),
             ("c", "a"): _verdict(("c", "a"), 150, False)}  # fmt: skip
    together = _verdict(("a", "b", "c"), 130, False)
    att = attribute(
        {"a": [], "b": [], "c": []}, together, pairs, pair_fraction=pair_slow_fraction()
    )
    assert att.verdict == NODE and att.nodes == ["c"]
    assert sorted(map(tuple, att.slow_pairs)) == [("b", "c"), ("c", "a")]
    # a pair above the floor but far below the best pair is slow too (SuperBench-style)
    pairs[("b", "c")] = _verdict(("b", "c"), 230, True)
    att = attribute({"a": [], "b": [], "c": []}, together, pairs, pair_fraction=0.8)
    assert att.verdict == NODE and att.nodes == ["c"]


def test_every_pair_slow_is_the_fabric_and_a_pass_is_a_pass() -> None:
    pairs = {("a", "b"): _verdict(("a", "b"), 100, False),
             ("b", "c"): _verdict(("b", "c"), 110, False),
             ("c", "a"): _verdict(("c", "a"), 105, False)}  # fmt: skip
    together = _verdict(("a", "b", "c"), 90, False)
    assert attribute({"a": [], "b": [], "c": []}, together, pairs).verdict == FABRIC
    ok = attribute({"a": [], "b": []}, _verdict(("a", "b"), 300, True))
    assert ok.verdict == PASS
