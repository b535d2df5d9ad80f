"""NVLink: every expected link active; error counters under thresholds."""

from __future__ import annotations

import pynvml
from imagectl.validators.checks.base import Finding, bad, check, ok, skip, warn
from imagectl.validators.context import Context
from imagectl.validators.nvml.calls import NVLINK_COUNTERS
from imagectl.validators.nvml.errors import error_name, is_unsupported
from imagectl.validators.results import Action, Severity


def _expected_links(ctx: Context) -> int | None:
    hw = ctx.expect.hardware
    return hw.nvlink_links if hw is not None else None


@check("gpu.nvlink.active", "Every expected NVLink link active", per_gpu=True)
def links_active(ctx: Context, gpu: int) -> Finding:
    want = _expected_links(ctx)
    if want == 0:
        return skip("no NVLink on this shape")
    h = ctx.handles[gpu]
    inactive: list[int] = []
    active: list[int] = []
    for link in range(want if want is not None else 18):
        try:
            state = ctx.nvml.nvmlDeviceGetNvLinkState(h, link)
        except pynvml.NVMLError as exc:
            if want is None and (is_unsupported(exc) or error_name(exc) == "INVALID_ARGUMENT"):
                break  # no shape: count what the GPU has
            if is_unsupported(exc) or error_name(exc) == "INVALID_ARGUMENT":
                inactive.append(link)
                continue
            raise
        (active if state == pynvml.NVML_FEATURE_ENABLED else inactive).append(link)
    if want is None:
        if inactive:
            return bad(
                Action.RESET_GPU,
                f"NVLink links {inactive} inactive",
                measured=len(active),
                expected=len(active) + len(inactive),
            )
        return ok("no shape given: judged the links the GPU reports", measured=len(active))
    src = ctx.expect.hardware.source if ctx.expect.hardware else None
    if inactive:
        return bad(
            Action.RESET_GPU,
            f"{len(inactive)} of {want} NVLink links inactive ({inactive}): reset the GPU; "
            "if it persists, isolate (NVLink workflow)",
            measured=len(active),
            expected=want,
            unit="links",
            source=src,
            details={"inactive": inactive},
        )
    return ok(measured=len(active), expected=want, unit="links", source=src)


@check(
    "gpu.nvlink.errors",
    "NVLink error counters under thresholds",
    per_gpu=True,
    severity=Severity.WARNING,
)
def link_errors(ctx: Context, gpu: int) -> Finding:
    want = _expected_links(ctx)
    if want == 0:
        return skip("no NVLink on this shape")
    h = ctx.handles[gpu]
    totals = dict.fromkeys(NVLINK_COUNTERS, 0)
    per_link: dict[int, int] = {}
    for link in range(want if want is not None else 18):
        for name, counter in NVLINK_COUNTERS.items():
            try:
                n = int(ctx.nvml.nvmlDeviceGetNvLinkErrorCounter(h, link, counter))
            except pynvml.NVMLError as exc:
                if is_unsupported(exc) or error_name(exc) == "INVALID_ARGUMENT":
                    continue
                raise
            totals[name] += n
            per_link[link] = per_link.get(link, 0) + n
    crc = totals["crc_flit"] + totals["crc_data"]
    total = sum(totals.values())
    t_crc = ctx.thresholds["nvlink.crc_max"]
    t_warn = ctx.thresholds["nvlink.errors_warn"]
    details = {"per_link": {k: v for k, v in per_link.items() if v}}
    if crc > t_crc.value:
        return bad(
            Action.RESET_GPU,
            f"{crc} NVLink CRC errors",
            measured=totals,
            expected=f"CRC <= {t_crc.value}",
            unit="errors",
            source=t_crc.source,
            details=details,
            severity=Severity.CRITICAL,
        )
    if total >= t_warn.value:
        return warn(
            f"{total} NVLink errors in total",
            measured=totals,
            expected=f"< {t_warn.value}",
            unit="errors",
            source=t_warn.source,
            action=Action.RESET_GPU,
            details=details,
        )
    return ok(measured=totals, expected=f"< {t_warn.value}", unit="errors", source=t_warn.source)
