"""Device properties against the shape: GPU count, model name and memory size."""

from __future__ import annotations

from typing import Any

from imagectl.validators.registry import Runs, check_result, declare
from imagectl.validators.results import Action, CheckResult, Outcome, Severity

declare(
    "cuda.device_properties", "Device properties match the shape (count, model, memory, SMs)",
    runs=Runs.TORCH, action=Action.BLOCK_IMAGE,
)  # fmt: skip

MEMORY_TOLERANCE = 0.08  # usable memory is a little below the marketed GiB (ECC, reserved)


def properties_check(props: list[dict[str, Any]], expect: object) -> CheckResult:
    """``props``: per device ``{"index", "name", "total_memory", "sm_count", "capability"}``;
    the model and memory are judged against the expectations' hardware table (built on
    the controller from images/compat/gpus.yaml, shipped in expect.json)."""
    gpu = getattr(expect, "gpu", None)
    want_count = getattr(expect, "gpu_count", 0) or 0
    info = getattr(expect, "hardware", None)
    problems = []
    if want_count and len(props) != want_count:
        problems.append(f"{len(props)} GPUs visible, the shape has {want_count}")
    for p in props:
        if info is not None and info.nvml_names and p["name"] not in info.nvml_names:
            problems.append(
                f"GPU {p['index']} is {p['name']!r}, expected one of {list(info.nvml_names)}"
            )
        if info is not None and info.memory_gib:
            gib = p["total_memory"] / (1 << 30)
            if gib < info.memory_gib * (1 - MEMORY_TOLERANCE):
                problems.append(
                    f"GPU {p['index']} has {gib:.1f} GiB, {gpu} has {info.memory_gib} GiB"
                )
    sms = sorted({p["sm_count"] for p in props})
    if len(sms) > 1:
        problems.append(f"GPUs differ in SM count {sms}")
    common: dict[str, Any] = {
        "id": "cuda.device_properties",
        "measured": len(props),
        "expected": want_count or None,
        "details": {"devices": props, "sku": gpu},
        "source": "images/catalog/shapes.yaml, images/compat/gpus.yaml",
    }
    if problems:
        return check_result(
            **common,
            severity=Severity.CRITICAL,
            outcome=Outcome.FAIL,
            action=Action.REBOOT,
            message="; ".join(problems),
        )
    note = (
        ""
        if info is not None
        else f" (no hardware table for {gpu!r} in the expectations: model not checked)"
    )
    return check_result(
        **common,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        message=f"{len(props)} x {props[0]['name'] if props else '?'}{note}",
    )
