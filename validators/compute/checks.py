"""CheckResults from the smoke measurements: floors, correctness, consistency, load."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imagectl.validators.compute.gemm import DTYPES, TOLERANCE, GemmRun
from imagectl.validators.compute.load import FATAL_REASONS, LoadSummary
from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

CPU_FLOORS = "not applicable on cpu"

# The CUDA smoke tests (torch) and the hardware sampled under their load, in run order.
for _dtype in DTYPES:
    declare(
        f"cuda.gemm.{_dtype}",
        f"{_dtype} GEMM: correct against an fp64 reference, TFLOP/s against the floor",
        runs=Runs.TORCH, action=Action.ISOLATE_RMA, per_gpu=True,
    )  # fmt: skip
declare(
    "cuda.gemm.consistency",
    "Every GPU computes the same GEMM bits (cuBLAS reproducibility)",
    runs=Runs.TORCH, action=Action.ISOLATE_RMA,
)  # fmt: skip
declare(
    "cuda.hbm_bandwidth",
    "Device memory bandwidth (device-to-device copy, read + write)",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
declare(
    "cuda.h2d_bandwidth", "Pinned host-to-device copy bandwidth",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
declare(
    "cuda.d2h_bandwidth", "Pinned device-to-host copy bandwidth",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
declare(
    "cuda.p2p_bandwidth",
    "Peer-to-peer copy bandwidth for every GPU pair (the NVLink matrix)",
    runs=Runs.TORCH, action=Action.DRAIN,
)  # fmt: skip
declare(
    "load.clock_events", "No HW slowdown, HW thermal or power brake while loaded",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
declare(
    "load.pcie_link",
    "PCIe link at the expected generation and width in every sample under load",
    runs=Runs.TORCH, action=Action.REBOOT, per_gpu=True,
)  # fmt: skip
declare(
    "load.temperature", "GPU temperature under load",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip


def floor_check(
    *,
    check_id: str,
    measured: float,
    unit: str,
    floor: dict[str, Any] | None,
    device: str,
    gpu: int | None,
    details: dict[str, object] | None = None,
) -> CheckResult:
    """Higher-is-better figure against ``floor`` ({"min", "source"}); no floors on CPU."""
    details = dict(details or {})
    value = float(f"{measured:.6g}")
    common: dict[str, object] = {
        "id": check_id,
        "unit": unit,
        "gpu": gpu,
        "measured": value,
    }
    if device == "cpu":
        details["floors"] = CPU_FLOORS
        return check_result(
            **common,
            details=details,
            severity=Severity.INFO,
            outcome=Outcome.PASS,
            message=f"{value} {unit} (floors {CPU_FLOORS})",
        )
    if not floor:
        return check_result(
            **common,
            details=details,
            severity=Severity.WARNING,
            outcome=Outcome.WARN,
            message=f"{value} {unit}; no floor in floors.yaml for this GPU: recorded, not gated",
        )
    common.update(expected=floor["min"], source=floor["source"], details=details)
    if measured < floor["min"]:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.DRAIN,
            message=f"{value} {unit} is below the floor of {floor['min']} {unit}",
        )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"{value} {unit} >= {floor['min']}",
    )


def gemm_checks(
    runs: list[GemmRun], floors: dict[str, Any], device: str, gpu_of: Callable[[int], int | None]
) -> list[CheckResult]:
    checks = []
    for run in runs:
        check_id = f"cuda.gemm.{run.dtype}"
        details: dict[str, object] = {"rel_error": run.rel_error, "tolerance": TOLERANCE[run.dtype]}
        if not run.correct:
            why = run.error or (
                f"relative error {run.rel_error:.3g} exceeds {TOLERANCE[run.dtype]:g}"
                + (" (tf32 must be off)" if run.dtype == "fp32" else "")
            )
            checks.append(
                check_result(
                    id=check_id,
                    gpu=gpu_of(run.device_index),
                    severity=Severity.CRITICAL,
                    outcome=Outcome.FAIL,
                    action=Action.ISOLATE_RMA if run.error is None else Action.RESET_GPU,
                    unit="TFLOP/s",
                    measured=None if run.tflops is None else round(run.tflops, 3),
                    details=details,
                    message=f"wrong GEMM result: {why}",
                )
            )
            continue
        assert run.tflops is not None
        checks.append(
            floor_check(
                check_id=check_id,
                measured=run.tflops,
                unit="TFLOP/s",
                floor=(floors.get("gemm_tflops") or {}).get(run.dtype),
                device=device,
                gpu=gpu_of(run.device_index),
                details=details,
            )
        )
    return checks


def consistency_check(
    results: dict[str, dict[str, Any]], ndevices: int, gpu_of: Any
) -> CheckResult:
    """``results``: dtype -> gemm.consistency(); fails naming the GPUs outside the majority."""
    common: dict[str, object] = {
        "id": "cuda.gemm.consistency",
        "details": {"per_dtype": results, "devices": ndevices},
        "source": "cuBLAS docs: bit-wise reproducible on the same architecture and SM count",
    }
    if ndevices < 2:
        return check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message="one device: nothing to compare",
        )
    bad = {
        dtype: r["outliers"]
        for dtype, r in results.items()
        if r["outliers"] or len(r["groups"]) > 1
    }
    if bad:
        named = sorted({gpu_of(i) for out in bad.values() for i in out})
        text = "; ".join(
            f"{dtype}: {len(results[dtype]['groups'])} distinct results {results[dtype]['groups']}"
            for dtype in bad
        )
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.ISOLATE_RMA,
            measured=named,
            message=f"GPUs {named} compute a different answer from the others ({text})",
        )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"{ndevices} devices returned identical bits for {', '.join(results)}",
    )


def p2p_check(pairs: list[dict[str, Any]], floors: dict[str, Any], nvswitch: bool) -> CheckResult:
    floor = floors.get("p2p_gbps")
    slow, missing = [], []
    for pair in pairs:
        if not pair["peer_access"]:
            missing.append(f"{pair['src']}->{pair['dst']}")
        elif floor and pair["gbps"] < floor["min"]:
            pair["ok"] = False
            slow.append(f"{pair['src']}->{pair['dst']} {pair['gbps']:.0f} GB/s")
        else:
            pair["ok"] = True
            pair["gbps"] = round(pair["gbps"], 3)
    measured = [p["gbps"] for p in pairs if "gbps" in p]
    common: dict[str, object] = {
        "id": "cuda.p2p_bandwidth",
        "unit": "GB/s",
        "measured": round(min(measured), 3) if measured else None,
        "expected": floor["min"] if floor else None,
        "source": floor["source"] if floor else None,
        "details": {"pairs": pairs},
    }
    if missing and (nvswitch or floor):
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.RESET_GPU,
            message=f"no peer access between {', '.join(missing)}",
        )
    if slow:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.DRAIN,
            message=f"{len(slow)} pair(s) below {floor['min']} GB/s: {', '.join(slow)}",  # type: ignore[index]
        )
    if not measured:
        return check_result(
            **common,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message="no GPU pair has peer access (PCIe SKU)",
        )
    if not floor:
        return check_result(
            **common,
            severity=Severity.WARNING,
            outcome=Outcome.WARN,
            message=f"min pair {min(measured):.0f} GB/s; no floor for this GPU: not gated",
        )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"{len(measured)} pairs, slowest {min(measured):.0f} GB/s >= {floor['min']}",
    )


def load_checks(
    summaries: dict[int, LoadSummary],
    *,
    pcie: dict[int, dict[str, Any]],
    max_temp: dict[str, Any] | None,
    min_rate_hz: float,
    rates: dict[int, float],
    load_s: float,
) -> list[CheckResult]:
    """Per GPU: clock events, PCIe link and temperature under load."""
    checks = []
    for index, summ in sorted(summaries.items()):
        details = {**summ, "rate_hz": round(rates[index], 2), "load_s": load_s}
        fatal = {name: n for name, n in summ["reasons"].items() if name in FATAL_REASONS.values()}
        base: dict[str, object] = {
            "id": "load.clock_events",
            "gpu": index,
            "details": details,
            "unit": "samples",
            "source": "Autopilot, gpud: HW slowdown / thermal / power brake under load is a fault",
        }
        if summ["samples"] == 0 or not summ["reasons_supported"]:
            checks.append(
                check_result(
                    **base,
                    severity=Severity.WARNING,
                    outcome=Outcome.ERROR,
                    message="no clock-event reasons could be read under load",
                )
            )
        elif fatal:
            checks.append(
                check_result(
                    **base,
                    severity=Severity.CRITICAL,
                    outcome=Outcome.FAIL,
                    action=Action.DRAIN,
                    measured=sum(fatal.values()),
                    expected=0,
                    message=", ".join(
                        f"{name} in {n} of {summ['samples']} samples "
                        f"(first at {summ['first_seen_s'][name]} s)"
                        for name, n in fatal.items()
                    ),
                )
            )
        elif rates[index] < min_rate_hz:
            checks.append(
                check_result(
                    **base,
                    severity=Severity.WARNING,
                    outcome=Outcome.WARN,
                    measured=0,
                    message=f"sampled at {rates[index]:.1f} Hz, below {min_rate_hz} Hz: "
                    "events may be missed",
                )
            )
        else:
            sw = summ["reasons"].get("sw_thermal")
            checks.append(
                check_result(
                    **base,
                    severity=Severity.WARNING if sw else Severity.INFO,
                    outcome=Outcome.WARN if sw else Outcome.PASS,
                    measured=0,
                    expected=0,
                    message=(f"SW thermal slowdown in {sw} samples" if sw else "no HW clock events")
                    + f" ({summ['samples']} samples at {rates[index]:.1f} Hz over {load_s:g} s)",
                )
            )
        checks.append(_pcie_check(index, summ, pcie.get(index) or {}))
        checks.append(_temp_check(index, summ, max_temp))
    return checks


def _pcie_check(index: int, summ: LoadSummary, want: dict[str, Any]) -> CheckResult:
    """Every sample under load at the expected link: one low sample fails (not the best)."""
    links = [(int(g), int(w)) for g, w in summ.get("pcie_links") or []]
    low = [(g, w) for g, w in links if want and (g < want["gen"] or w < want["width"])]
    worst = min(low or links, default=None)
    base: dict[str, object] = {
        "id": "load.pcie_link",
        "gpu": index,
        "measured": f"Gen{worst[0]} x{worst[1]}" if worst else None,
        "expected": f"Gen{want.get('gen')} x{want.get('width')}" if want else None,
        "source": want.get("source"),
        "details": {
            "samples": len(links),
            "samples_below": len(low),
            "unreadable_samples": summ.get("pcie_unread", 0),
            "expected": want,
        },
    }
    if not want:
        return check_result(
            **base,
            severity=Severity.INFO,
            outcome=Outcome.SKIP,
            message="no expected PCIe link for this GPU",
        )
    if not links:
        return check_result(
            **base,
            severity=Severity.WARNING,
            outcome=Outcome.ERROR,
            message="the PCIe link could not be read under load",
        )
    if low:
        return check_result(
            **base,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.REBOOT,
            message=f"PCIe link below Gen{want['gen']} x{want['width']} in {len(low)} of "
            f"{len(links)} samples under load (worst Gen{worst[0]} x{worst[1]})"
            if worst
            else "",
        )
    return check_result(
        **base,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"Gen{want['gen']} x{want['width']} in all {len(links)} samples under load",
    )


def _temp_check(index: int, summ: LoadSummary, max_temp: dict[str, Any] | None) -> CheckResult:
    base: dict[str, object] = {
        "id": "load.temperature",
        "gpu": index,
        "unit": "C",
        "measured": summ["temp_max_c"],
        "expected": max_temp["max"] if max_temp else None,
        "source": max_temp["source"] if max_temp else None,
        "details": {"power_max_w": summ["power_max_w"], "power_mean_w": summ["power_mean_w"]},
    }
    if summ["temp_max_c"] is None:
        return check_result(
            **base,
            severity=Severity.WARNING,
            outcome=Outcome.ERROR,
            message="no temperature read under load",
        )
    if max_temp and summ["temp_max_c"] > max_temp["max"]:
        return check_result(
            **base,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.DRAIN,
            message=f"{summ['temp_max_c']} C under load, above {max_temp['max']} C",
        )
    return check_result(
        **base,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"max {summ['temp_max_c']} C, max power {summ['power_max_w']} W",
    )
