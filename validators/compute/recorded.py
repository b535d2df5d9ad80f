"""Judge the samples taken under load: live (the smoke tests' GEMM load) or recorded in a
snapshot's ``load`` section, by the same code, so every ``load.*`` check runs in replay.

The recording (``load.Sampler.recording``): per GPU the clocks' maxima and slowdown
temperature, the counters read at the start and the end of the load (volatile ECC, PCIe
replays) and every sample (utilisation, SM/memory clocks, clock-event reasons,
temperature, power, current PCIe link). Checks:

- ``load.clock_events``, ``load.pcie_link``, ``load.temperature`` (``checks.load_checks``);
- ``load.sm_clock``: the SM clock stuck low under load while no clock-event reason explains
  it (NVML: with no reason set the clocks are as high as possible);
- ``load.ecc``: new uncorrectable errors during the load, judged as a rate (DCGM's health
  watch: any new DBE fails, next step drain and reset);
- ``load.pcie_replay``: replays during the load per minute against DCGM's health-watch
  limit for the link (``validators/rates.py``).
"""

from __future__ import annotations

import statistics
from typing import Any

from imagectl.validators.catalogs import thresholds
from imagectl.validators.compute.checks import load_checks
from imagectl.validators.compute.floors import floors_for, load_floors
from imagectl.validators.compute.load import _call, summarise
from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.rates import pcie_replay_limit_per_min, per_minute
from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

declare(
    "load.sm_clock",
    "SM clock under load at its maximum unless a clock-event reason says why",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
declare(
    "load.ecc", "No new uncorrectable ECC error during the load (a rate)",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
declare(
    "load.pcie_replay", "PCIe replays during the load under DCGM's health-watch rate",
    runs=Runs.TORCH, action=Action.DRAIN, per_gpu=True,
)  # fmt: skip
LOAD_IDS = (
    "load.clock_events",
    "load.pcie_link",
    "load.temperature",
    "load.sm_clock",
    "load.ecc",
    "load.pcie_replay",
)


def _result(check_id: str, gpu: int, outcome: Outcome, message: str, **kw: object) -> CheckResult:
    severity = {
        Outcome.FAIL: Severity.CRITICAL,
        Outcome.ERROR: Severity.WARNING,
        Outcome.WARN: Severity.WARNING,
    }.get(outcome, Severity.INFO)
    return check_result(
        id=check_id,
        severity=severity,
        outcome=outcome,
        gpu=gpu,
        message=message,
        **kw,
    )


def _loaded(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Samples under load (utilisation at least load.utilization_min_pct); all of them when
    utilisation could not be read."""
    t = thresholds()["load.utilization_min_pct"]
    if all(s.get("util") is None for s in samples):
        return samples
    return [s for s in samples if (s.get("util") or 0) >= t.value]


def sm_clock_check(gpu: dict[str, Any]) -> CheckResult:
    index = int(gpu["index"])
    frac = thresholds()["load.sm_clock_min_fraction"]
    share = thresholds()["load.sm_clock_low_samples_fraction"]
    src = f"{frac.source}; imagectl policy: {frac.reason}"
    top = gpu.get("sm_max_mhz")
    loaded = [s for s in _loaded(gpu.get("samples") or []) if s.get("sm_mhz") is not None]
    if not top or not loaded:
        return _result(
            "load.sm_clock",
            index,
            Outcome.ERROR,
            "the SM clock or its maximum could not be read under load",
            source=src,
        )
    floor = float(frac.value) * float(top)
    low = [s for s in loaded if float(s["sm_mhz"]) < floor]
    unexplained = [s for s in low if s.get("reasons") == 0]
    median = statistics.median(float(s["sm_mhz"]) for s in loaded)
    common: dict[str, object] = {
        "measured": median,
        "expected": f">= {floor:g} MHz ({frac.value:g} x max {top} MHz) or a clock-event reason",
        "unit": "MHz",
        "source": src,
        "details": {
            "samples": len(loaded),
            "low_samples": len(low),
            "low_without_reason": len(unexplained),
            "sm_max_mhz": top,
            "mem_max_mhz": gpu.get("mem_max_mhz"),
            "mem_mhz_median": statistics.median(
                [float(s["mem_mhz"]) for s in loaded if s.get("mem_mhz") is not None] or [0.0]
            ),
        },
    }
    if len(unexplained) >= float(share.value) * len(loaded):
        return _result(
            "load.sm_clock",
            index,
            Outcome.FAIL,
            f"SM clock under {floor:g} MHz in {len(unexplained)} of {len(loaded)} samples under "
            f"load (median {median:g} of max {top} MHz) with no clock-event reason set: NVML "
            "says the clocks are as high as possible, so the GPU is slowed by something it "
            "does not report (locked clocks, firmware); drain for a person to look",
            action=Action.DRAIN,
            **common,
        )
    why = f"; {len(low) - len(unexplained)} low sample(s) explained by a clock-event reason"
    return _result(
        "load.sm_clock",
        index,
        Outcome.PASS,
        f"median SM clock {median:g} of max {top} MHz under load" + (why if low else ""),
        **common,
    )


def _delta(gpu: dict[str, Any], key: str) -> int | None:
    a, b = (gpu.get("start") or {}).get(key), (gpu.get("end") or {}).get(key)
    if not isinstance(a, int) or not isinstance(b, int):
        return None
    return b - a


def ecc_check(gpu: dict[str, Any], seconds: float) -> CheckResult:
    index = int(gpu["index"])
    t = thresholds()["ecc.uncorrected_rate_max_per_min"]
    new = _delta(gpu, "ecc_uncorrected")
    corrected = _delta(gpu, "ecc_corrected")
    if new is None:
        return _result(
            "load.ecc",
            index,
            Outcome.SKIP,
            "volatile ECC counters not readable at the start and end of the load",
            source=t.source,
        )
    rate = round(per_minute(new, seconds), 3)
    common: dict[str, object] = {
        "measured": rate,
        "expected": f"<= {t.value:g} per minute",
        "unit": t.unit,
        "source": t.source,
        "details": {"new_uncorrected": new, "new_corrected": corrected, "window_s": seconds},
    }
    if rate > float(t.value):
        return _result(
            "load.ecc",
            index,
            Outcome.FAIL,
            f"{new} new uncorrectable ECC error(s) in {seconds:g} s under load ({rate} per "
            "minute): drain the GPU and reset it (DCGM_FR_VOLATILE_DBE_DETECTED)",
            action=Action.DRAIN,
            **common,
        )
    return _result(
        "load.ecc",
        index,
        Outcome.PASS,
        f"no new uncorrectable ECC error in {seconds:g} s under load"
        + (f" ({corrected} corrected, recorded)" if corrected else ""),
        **common,
    )


def pcie_replay_check(gpu: dict[str, Any], seconds: float, link: dict[str, Any]) -> CheckResult:
    index = int(gpu["index"])
    t = thresholds()["pcie.replay_ber"]
    new = _delta(gpu, "pcie_replay")
    if new is None or not link:
        return _result(
            "load.pcie_replay",
            index,
            Outcome.SKIP,
            "PCIe replay counter or link not readable at the start and end of the load",
            source=t.source,
        )
    limit = pcie_replay_limit_per_min(int(link["gen"]), int(link["width"]), float(t.value))
    rate = round(per_minute(new, seconds), 2)
    common: dict[str, object] = {
        "measured": rate,
        "expected": f"<= {limit} per minute (Gen{link['gen']} x{link['width']})",
        "unit": "replays/min",
        "source": t.source,
        "details": {"replays": new, "window_s": seconds, "limit_per_min": limit},
    }
    if rate > limit:
        return _result(
            "load.pcie_replay",
            index,
            Outcome.FAIL,
            f"{new} PCIe replays in {seconds:g} s under load: {rate} per minute, over the "
            f"{limit} DCGM's health watch allows (DCGM_FR_PCI_REPLAY_RATE): reseat the card, "
            "check the slot and riser",
            action=Action.DRAIN,
            **common,
        )
    return _result(
        "load.pcie_replay", index, Outcome.PASS, f"{rate} replays per minute under load", **common
    )


def expected_link(
    nvml: NvmlBackend | None, index: int, floor: dict[str, Any] | None
) -> dict[str, object]:
    """The floors table's link, raised to NVML's max for this device and slot if higher."""
    want = dict(floor or {})
    handle = _call(nvml, ("nvmlDeviceGetHandleByIndex",), index) if nvml is not None else None
    for key, fn in (
        ("gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
        ("width", "nvmlDeviceGetMaxPcieLinkWidth"),
    ):
        value = _call(nvml, (fn,), handle) if handle is not None else None
        if isinstance(value, int) and value > int(want.get(key) or 0):
            want[key] = value
            want["source"] = f"{want.get('source') or 'none'}; NVML {fn} = {value}"
    return want if "gen" in want and "width" in want else {}


def judge_recording(
    record: dict[str, Any], nvml: NvmlBackend | None, gpu_model: str | None, shape: str | None
) -> list[CheckResult]:
    """Every ``load.*`` result of one recording (``load.Sampler.recording``)."""
    gpus = sorted(record.get("gpus") or [], key=lambda g: int(g["index"]))
    seconds = float(record.get("duration_s") or 0.0)
    floor = floors_for(gpu_model, shape).get("pcie")
    links = {int(g["index"]): expected_link(nvml, int(g["index"]), floor) for g in gpus}
    limits = load_floors().get("load") or {}
    span = max(seconds, 1e-9)
    out = load_checks(
        {int(g["index"]): summarise(g.get("samples") or []) for g in gpus},
        pcie=links,
        max_temp=limits.get("max_temperature_c"),
        min_rate_hz=(limits.get("min_sample_hz") or {}).get("min", 2),
        rates={int(g["index"]): len(g.get("samples") or []) / span for g in gpus},
        load_s=float(record.get("load_s") or seconds),
    )
    for g in gpus:
        out += [
            sm_clock_check(g),
            ecc_check(g, seconds),
            pcie_replay_check(g, seconds, links[int(g["index"])]),
        ]
    return out


def not_recorded(reason: str) -> list[CheckResult]:
    """The load.* checks when nothing was sampled under load (one skip each)."""
    return [
        check_result(id=cid, severity=Severity.INFO, outcome=Outcome.SKIP, message=reason)
        for cid in LOAD_IDS
    ]
