"""Clocks and thermals: clock-event reasons, temperature, power limit; and the same
judged on samples taken under load (quick/full/burn)."""

from __future__ import annotations

from typing import Any

import pynvml

from imagectl.validators.checks.base import LOADED_PROFILES, check
from imagectl.validators.checks.inventory import majority, peer_values
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.nvml.calls import TEMP_GPU, THRESHOLD_SLOWDOWN
from imagectl.validators.nvml.errors import is_unsupported
from imagectl.validators.results import Action, Outcome

SHAPES = "images/catalog/shapes.yaml"


def judge_clock_events(ctx: Context, mask: int) -> Finding:
    active = [e for e in ctx.thresholds.clock_events if mask & e.bit]
    names = [e.name for e in active] or ["NONE"]
    faults = [e for e in active if e.outcome == Outcome.FAIL]
    warns = [e for e in active if e.outcome == Outcome.WARN]
    if faults:
        worst = max((e.action for e in faults), key=lambda a: a.rank)
        return bad(
            worst,
            f"clock event reasons {', '.join(e.name for e in faults)} active: the GPU is being "
            "slowed by hardware (thermal, power brake or an external slowdown signal)",
            measured=names,
            expected="no HW_SLOWDOWN / HW_THERMAL_SLOWDOWN / HW_POWER_BRAKE",
            source="; ".join(e.source for e in faults),
            details={"mask": hex(mask)},
        )
    if warns:
        return warn(
            f"{', '.join(e.name for e in warns)} active",
            measured=names,
            source="; ".join(e.source for e in warns),
            details={"mask": hex(mask)},
        )
    return ok(measured=names, details={"mask": hex(mask)})


@check("gpu.clocks.events", "No hardware clock slowdown (clock event reasons)", per_gpu=True)
def clock_events(ctx: Context, gpu: int) -> Finding:
    mask = int(ctx.nvml.nvmlDeviceGetCurrentClocksEventReasons(ctx.handles[gpu]))
    return judge_clock_events(ctx, mask)


def judge_temperature(ctx: Context, temp: float, slowdown: float | None) -> Finding:
    hw = ctx.expect.hardware
    limit = hw.temp_max_c if hw else None
    warn_at = hw.temp_warn_c if hw else None
    expected: dict[str, Any] = {"below_slowdown": slowdown, "max": limit}
    if slowdown is not None and temp >= slowdown:
        return bad(
            Action.DRAIN,
            f"{temp} C reaches the GPU's slowdown threshold {slowdown} C: check cooling",
            measured=temp,
            expected=expected,
            unit="C",
            source="NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",
        )
    if limit is not None and temp >= limit:
        return bad(
            Action.DRAIN,
            f"{temp} C is at or over the shape's limit {limit} C",
            measured=temp,
            expected=expected,
            unit="C",
            source=hw.source if hw else SHAPES,
        )
    if warn_at is not None and temp >= warn_at:
        return warn(
            f"{temp} C: performance falls from here",
            measured=temp,
            expected=expected,
            unit="C",
            source=hw.source if hw else SHAPES,
        )
    return ok(
        measured=temp, expected=expected, unit="C", source="NVML slowdown threshold; " + SHAPES
    )


@check(
    "gpu.temperature",
    "Temperature under the slowdown threshold and the shape's limit",
    per_gpu=True,
)
def temperature(ctx: Context, gpu: int) -> Finding:
    h = ctx.handles[gpu]
    temp = ctx.nvml.nvmlDeviceGetTemperature(h, TEMP_GPU)
    try:
        slowdown = ctx.nvml.nvmlDeviceGetTemperatureThreshold(h, THRESHOLD_SLOWDOWN)
    except pynvml.NVMLError as exc:
        if not is_unsupported(exc):
            raise
        slowdown = None  # judged against the shape's limit only
    return judge_temperature(ctx, float(temp), float(slowdown) if slowdown else None)


@check("gpu.power.limit", "Enforced power limit as expected and as its peers'", per_gpu=True)
def power_limit(ctx: Context, gpu: int) -> Finding:
    hw = ctx.expect.hardware
    limits = peer_values(ctx, gpu, lambda h: ctx.nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0)
    limit_w = limits[gpu]
    t = ctx.thresholds["power.limit_min_fraction"]
    # a configurable TDP (H100 NVL 350-400 W): any limit in NVIDIA's range is in spec
    in_range = hw is not None and hw.power_limit_min_w is not None and hw.power_limit_w is not None
    if hw is not None and hw.power_limit_w is not None:
        lowest = hw.power_limit_min_w if in_range and hw.power_limit_min_w else hw.power_limit_w
        floor = lowest * float(t.value)
        if limit_w < floor:
            spec = (
                f"the board's configurable {lowest:g}-{hw.power_limit_w:g} W"
                if in_range
                else f"the shape's {hw.power_limit_w:g} W"
            )
            return bad(
                Action.REBOOT,
                f"power limit {limit_w:g} W is under {spec}: the GPU is capped (nvidia-smi -pl); "
                "a reboot restores the default",
                measured=limit_w,
                expected=f">= {floor:g}",
                unit="W",
                source=f"{hw.source}; {t.source}",
            )
    # NVML's own default for this board (what a reboot restores)
    try:
        default_w = ctx.nvml.nvmlDeviceGetPowerManagementDefaultLimit(ctx.handles[gpu]) / 1000.0
    except pynvml.NVMLError:
        default_w = None  # not judged against the default where the driver cannot say
    if default_w and in_range and hw is not None and hw.power_limit_min_w:
        default_w = min(default_w, hw.power_limit_min_w)  # configured lower: still in spec
    if default_w and limit_w < default_w * float(t.value):
        return bad(
            Action.REBOOT,
            f"power limit {limit_w:g} W is under the board's default {default_w:g} W: the GPU "
            "is capped (nvidia-smi -pl); a reboot restores the default",
            measured=limit_w,
            expected=f">= {default_w * float(t.value):g}",
            unit="W",
            source=f"NVML nvmlDeviceGetPowerManagementDefaultLimit; {t.source}",
        )
    # the same SKU on one host: the same enforced limit (one capped GPU slows a whole job)
    common = majority({i: round(w) for i, w in limits.items()}) if len(limits) > 1 else None
    if common is not None and limit_w < common * float(t.value):
        return bad(
            Action.REBOOT,
            f"power limit {limit_w:g} W is under its peers' {common:g} W: this GPU is capped",
            measured=limit_w,
            expected=f">= {common * float(t.value):g}",
            unit="W",
            source=t.source,
            details={"peers_w": limits},
        )
    if hw is None or hw.power_limit_w is None:
        if common is None:
            return skip("no power limit expected (no shape, no peer)", measured=limit_w, unit="W")
        return ok(measured=limit_w, expected=f">= {common * float(t.value):g}", unit="W")
    floor = hw.power_limit_w * float(t.value)
    return ok(measured=limit_w, expected=f">= {floor:g}", unit="W", source=hw.source)


def loaded_samples(ctx: Context, gpu: int) -> list[dict[str, Any]]:
    """Samples under load (validators/compute/load.py sample_once, live or recorded in a
    snapshot's ``load`` section)."""
    t = ctx.thresholds["load.utilization_min_pct"]
    return [s for s in ctx.load_samples.get(gpu, []) if (s.get("util") or 0) >= t.value]


@check(
    "gpu.load.clock_events",
    "No hardware clock slowdown under load",
    per_gpu=True,
    profiles=LOADED_PROFILES,
)
def load_clock_events(ctx: Context, gpu: int) -> Finding:
    samples = loaded_samples(ctx, gpu)
    if not samples:
        return skip("no sample under load (the compute smoke tests did not load this GPU)")
    mask = 0
    for s in samples:
        mask |= int(s.get("reasons") or 0)
    f = judge_clock_events(ctx, mask)
    f.details["samples"] = len(samples)
    return f


@check("gpu.load.temperature", "Temperature under load", per_gpu=True, profiles=LOADED_PROFILES)
def load_temperature(ctx: Context, gpu: int) -> Finding:
    samples = loaded_samples(ctx, gpu)
    if not samples:
        return skip("no sample under load")
    temps = [float(s["temp_c"]) for s in samples if s.get("temp_c") is not None]
    if not temps:
        return skip("no temperature read under load")
    try:
        slowdown = ctx.nvml.nvmlDeviceGetTemperatureThreshold(ctx.handles[gpu], THRESHOLD_SLOWDOWN)
    except pynvml.NVMLError as exc:
        if not is_unsupported(exc):
            raise
        slowdown = None
    f = judge_temperature(ctx, max(temps), float(slowdown) if slowdown else None)
    f.details["samples"] = len(samples)
    return f
