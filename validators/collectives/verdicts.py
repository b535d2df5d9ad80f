"""Turn a collective run (launch.RunReport) into CheckResults: values, busbw, floors, ranks."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from imagectl.validators.collectives.arithmetic import algbw_gbps, busbw_gbps
from imagectl.validators.collectives.launch import RunReport
from imagectl.validators.compute.floors import collective_gates, gate_for_size
from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

CPU_FLOORS = "not applicable on cpu"
TITLES = {
    "all_reduce": "NCCL all_reduce: values and bus bandwidth",
    "all_gather": "NCCL all_gather: values and bus bandwidth",
    "reduce_scatter": "NCCL reduce_scatter: values and bus bandwidth",
    "broadcast": "NCCL broadcast: values and bus bandwidth",
    "all_to_all": "NCCL all_to_all: values and bus bandwidth",
}
declare(
    "collective.rendezvous",
    "Collective ranks start, join the rendezvous and reach the first collective",
    runs=Runs.RANKS, action=Action.BLOCK_IMAGE,
)  # fmt: skip
for _op, _title in TITLES.items():
    declare(f"collective.{_op}", _title, runs=Runs.RANKS, action=Action.DRAIN)


def _sig(x: float) -> float:
    """Six significant digits: readable receipts without losing tiny CPU figures."""
    return float(f"{x:.6g}")


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else round(t - t0, 3)


def rank_details(report: RunReport) -> dict[str, dict[str, Any]]:
    """Per local rank: where it runs, when it joined and ran its first collective, its fate."""
    died = report.failure.died if report.failure else {}
    out: dict[str, dict[str, Any]] = {}
    for rank in report.local_ranks:
        state = report.ranks.get(rank)
        if state is None:
            out[str(rank)] = {"status": "never started"}
            continue
        if rank in died:
            status = "died"
        elif state.done_t:
            status = "finished"
        elif state.current:
            status = f"waiting in {state.current[0]} ({state.current[1]} B) when stopped"
        elif not state.rendezvous_t:
            status = "never entered the rendezvous"
        elif not state.joined_t:
            status = "waiting in the rendezvous when stopped"
        else:
            status = f"stopped after '{state.last_event}'"
        info: dict[str, object] = {
            "host": state.host,
            "pid": state.pid,
            "status": status,
            "started_s": _rel(state.started_t, report.launched_t),
            "joined_s": _rel(state.joined_t, report.launched_t),
            "first_collective_s": _rel(state.first_collective_t, report.launched_t),
        }
        if rank in died:
            info["error"] = died[rank].get("error")
            info["traceback"] = died[rank].get("traceback")
            if "exit_code" in died[rank]:
                info["exit_code"] = died[rank]["exit_code"]
        out[str(rank)] = info
    return out


def size_figures(report: RunReport, op: str) -> list[dict[str, Any]]:
    """Per swept size: mean time over local ranks (nccl-tests' default -a 1), algbw, busbw."""
    by_size: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for state in report.ranks.values():
        for ev in state.exits:
            if ev["op"] == op:
                by_size[int(ev["requested_bytes"])].append(ev)
    rows = []
    for requested in sorted(by_size):
        evs = by_size[requested]
        t_us = sum(e["time_us"] for e in evs) / len(evs)
        size = int(evs[0]["bytes"])
        bad = {str(e["rank"]): e["mismatch"] for e in evs if not e["ok"]}
        rows.append(
            {
                "bytes": size,
                "time_us": round(t_us, 3),
                "algbw_gbps": _sig(algbw_gbps(size, t_us / 1e6)),
                "busbw_gbps": _sig(busbw_gbps(op, size, t_us / 1e6, report.world_size)),
                "ok": not bad and len(evs) == len(report.local_ranks),
                "ranks_reported": len(evs),
                **({"mismatches": bad} if bad else {}),
            }
        )
    return rows


def _op_check(
    report: RunReport, op: str, *, device: str, floors: dict[str, Any], gpu: str | None
) -> CheckResult:
    rows = size_figures(report, op)
    failure = report.failure
    base: dict[str, Any] = {
        "id": f"collective.{op}",
        "unit": "GB/s",
        "source": "nccl-tests busbw arithmetic",
        "details": {"sizes": rows, "world_size": report.world_size, "ranks": rank_details(report)},
    }
    if failure is not None and failure.op is None and failure.kind == "died":
        # a rank died between collectives (before any rank entered the next one): the
        # first op left without figures is the one the run could not do
        undone = [o for o in report.plan.ops if not size_figures(report, o)]
        if undone and undone[0] == op:
            failure.op = op
    if failure is not None and failure.op == op:
        base["details"].update(
            failure=failure.kind, arrived=failure.arrived, missing=failure.missing
        )
        action = Action.REBOOT if failure.kind == "hang" else Action.RESET_GPU
        return check_result(
            **base,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=action,
            message=failure.message,
        )
    if not rows:
        why = failure.message if failure else "not in this profile's sweep"
        base["details"]["not_run_because"] = why
        return check_result(
            **base, severity=Severity.INFO, outcome=Outcome.SKIP, message=f"not run: {why}"
        )
    bad = [r for r in rows if not r["ok"]]
    if bad:
        first = bad[0]
        return check_result(
            **base,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.RESET_GPU,
            measured=rows[-1]["busbw_gbps"],
            message=(
                f"wrong values at {len(bad)} size(s); first at {first['bytes']} B: "
                f"{first.get('mismatches') or 'not every rank reported'}"
            ),
        )
    measured = rows[-1]["busbw_gbps"]
    if device == "cpu":
        base["details"]["floors"] = CPU_FLOORS
        for row in rows:
            row["gate"] = row is rows[-1]  # the largest size is the one compared with baselines
        return check_result(
            **base,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            measured=measured,
            message=(
                f"values correct on every rank at {len(rows)} sizes; busbw "
                f"{measured:.3f} GB/s at {rows[-1]['bytes']} B (floors {CPU_FLOORS})"
            ),
        )
    gates = collective_gates(floors, report.world_size, op)
    below = []
    for row in rows:
        gate = gate_for_size(gates, row["bytes"])
        row["gate"] = gate is not None
        if gate is not None:
            row["floor_gbps"] = gate["min_busbw_gbps"]
            if row["busbw_gbps"] < gate["min_busbw_gbps"]:
                below.append((row, gate))
    last_gate = gate_for_size(gates, rows[-1]["bytes"])
    expected = last_gate["min_busbw_gbps"] if last_gate else None
    source = last_gate["source"] if last_gate else base["source"]
    base["source"] = source
    if below:
        row, gate = below[0]
        return check_result(
            **base,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.DRAIN,
            measured=measured,
            expected=expected,
            message=(
                f"busbw below the floor at {len(below)} size(s); first {row['busbw_gbps']:.1f} "
                f"GB/s at {row['bytes']} B < {gate['min_busbw_gbps']} ({gate['source']})"
            ),
        )
    if not gates or not any(r.get("gate") for r in rows):
        why = (
            f"no floor for {gpu} at {report.world_size} ranks in floors.yaml"
            if not gates
            else f"sweep stops at {rows[-1]['bytes']} B, below the first gate"
        )
        return check_result(
            **base,
            severity=Severity.WARNING,
            outcome=Outcome.WARN,
            measured=measured,
            message=f"values correct; busbw {measured:.1f} GB/s not gated: {why}",
        )
    return check_result(
        **base,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        measured=measured,
        expected=expected,
        message=f"values correct; busbw {measured:.1f} GB/s at {rows[-1]['bytes']} B",
    )


def rendezvous_check(report: RunReport) -> CheckResult:
    ranks = rank_details(report)
    firsts = [r["first_collective_s"] for r in ranks.values() if r.get("first_collective_s")]
    failure = report.failure
    details: dict[str, object] = {
        "ranks": ranks,
        "world_size": report.world_size,
        "local_ranks": report.local_ranks,
        "duration_s": round(report.duration_s, 3),
    }
    if report.stderr_tail:
        details["stderr_tail"] = report.stderr_tail
    common = {
        "id": "collective.rendezvous",
        "unit": "s",
        "measured": max(firsts) if firsts else None,
        "details": details,
    }
    if failure is not None and (failure.kind == "rendezvous" or failure.op is None):
        details.update(failure=failure.kind, arrived=failure.arrived, missing=failure.missing)
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.REBOOT,
            message=failure.message,
        )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=(
            f"{len(report.local_ranks)} local ranks of {report.world_size} joined; slowest "
            f"first collective at {max(firsts):.2f} s after launch"
            if firsts
            else "ranks joined"
        ),
    )


def build_checks(
    report: RunReport, *, device: str, floors: dict[str, Any], gpu: str | None
) -> list[CheckResult]:
    checks = [rendezvous_check(report)]
    for op in report.plan.ops:
        checks.append(_op_check(report, op, device=device, floors=floors, gpu=gpu))
    return checks
