"""NVLink: every expected link up (ACTIVE or SLEEP) and the link error counters judged as
DCGM's health watch does. The fabric (state and health mask) is gpu.fabric.state.

A GPU in MIG mode has its NVLinks off by NVIDIA's design (``nvml/mig.py``, ``data/nvml.yaml``
``mig_nvlink``): its inactive links and unreadable counters are not faults."""

from __future__ import annotations

import pynvml

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.nvml.calls import NVLINK_COUNTERS
from imagectl.validators.nvml.errors import error_name, is_unsupported
from imagectl.validators.nvml.mig import MigLinks, links_off_by_mig
from imagectl.validators.nvml.policy import nvml_policy
from imagectl.validators.results import Action, Severity

DCGM_NVLINK = (
    "NVIDIA DCGM health watch (DcgmHealthWatch MonitorNVLink; dcgm_gpu_hardware_limits.h): "
    "replay and recovery errors fail at 1 (DCGM_FR_NVLINK_ERROR_CRITICAL); CRC flit/data "
    "errors fail at 100 per second (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR), warn below"
)


def _expected_links(ctx: Context) -> int | None:
    hw = ctx.expect.hardware
    return hw.nvlink_links if hw is not None else None


def _no_link(exc: pynvml.NVMLError) -> bool:
    return is_unsupported(exc) or error_name(exc) == "INVALID_ARGUMENT"


@check("gpu.nvlink.active", "Every expected NVLink link active", per_gpu=True)
def links_active(ctx: Context, gpu: int) -> Finding:
    want = _expected_links(ctx)
    if want == 0:
        return skip("no NVLink on this shape")
    policy = nvml_policy()
    h = ctx.handles[gpu]
    mig = links_off_by_mig(ctx.nvml, h)
    down: dict[int, str] = {}
    up: dict[int, str] = {}
    for link in range(want if want is not None else 18):
        try:
            value = int(ctx.nvml.nvmlDeviceGetNvLinkState(h, link))
        except pynvml.NVMLError as exc:
            if want is None and _no_link(exc):
                break  # no shape: count what the GPU has
            if _no_link(exc):
                down[link] = error_name(exc)
                continue
            raise
        state = policy.link_states.get(value)
        name = state.name if state else f"UNKNOWN({value})"
        (up if state is not None and state.healthy else down)[link] = name
    src = policy.link_states_source
    details: dict[str, object] = {"states": {**up, **down}}
    if mig is not None:
        return _links_under_mig(mig, up, down, details)
    if want is None:
        if down:
            return bad(
                Action.RESET_GPU,
                f"NVLink links {sorted(down)} not up: {down}",
                measured=len(up),
                expected=len(up) + len(down),
                source=src,
                details=details,
            )
        return ok(
            "no shape given: judged the links the GPU reports",
            measured=len(up),
            source=src,
            details=details,
        )
    if ctx.expect.hardware:
        src = f"{ctx.expect.hardware.source}; {src}"
    if down:
        return bad(
            Action.RESET_GPU,
            f"{len(down)} of {want} NVLink links not up ({down}): reset the GPU; if it "
            "persists, isolate (NVLink workflow)",
            measured=len(up),
            expected=want,
            unit="links",
            source=src,
            details={**details, "inactive": sorted(down)},
        )
    sleeping = sorted(k for k, v in up.items() if v == "SLEEP")
    note = f"{len(sleeping)} link(s) in SLEEP (low power, healthy)" if sleeping else ""
    return ok(note, measured=len(up), expected=want, unit="links", source=src, details=details)


def _links_under_mig(
    mig: MigLinks, up: dict[int, str], down: dict[int, str], details: dict[str, object]
) -> Finding:
    """MIG on: links off is what NVIDIA documents; a link up means MIG did not apply."""
    details = {**details, "mig": True, "arch": mig.arch}
    if up:
        return warn(
            f"{mig.note()}, yet NVLink links {sorted(up)} are up: NVIDIA turns them off with "
            "MIG; the MIG mode may not have been applied (a GPU reset pending)",
            measured=len(up),
            expected=0,
            unit="links",
            source=mig.source,
            details=details,
        )
    return ok(
        f"{mig.note()}: {len(down)} link(s) off, as expected",
        measured=0,
        expected=0,
        unit="links",
        source=mig.source,
        details=details,
    )


def _links_present(ctx: Context, gpu: int) -> list[int]:
    """No shape: the links whose state the GPU reports."""
    found = []
    for link in range(18):
        try:
            ctx.nvml.nvmlDeviceGetNvLinkState(ctx.handles[gpu], link)
        except pynvml.NVMLError as exc:
            if _no_link(exc):
                break
            raise
        found.append(link)
    return found


def _seconds_counted(ctx: Context) -> float | None:
    """Counters run from driver load: the host's uptime is the window they cover."""
    try:
        boot = ctx.fact("boot") or {}
    except Exception:
        return None
    up = boot.get("uptime_s") if isinstance(boot, dict) else None
    return float(up) if isinstance(up, int | float) and up > 0 else None


@check(
    "gpu.nvlink.errors",
    "NVLink error counters as DCGM's health watch judges them",
    per_gpu=True,
    severity=Severity.WARNING,
)
def link_errors(ctx: Context, gpu: int) -> Finding:
    want = _expected_links(ctx)
    if want == 0:
        return skip("no NVLink on this shape")
    h = ctx.handles[gpu]
    mig = links_off_by_mig(ctx.nvml, h)
    totals = dict.fromkeys(NVLINK_COUNTERS, 0)
    per_link: dict[int, dict[str, int]] = {}
    unreadable: list[str] = []
    first_exc: pynvml.NVMLError | None = None
    links = range(want) if want is not None else _links_present(ctx, gpu)
    for link in links:
        for name, counter in NVLINK_COUNTERS.items():
            try:
                n = int(ctx.nvml.nvmlDeviceGetNvLinkErrorCounter(h, link, counter))
            except pynvml.NVMLError as exc:
                if not _no_link(exc):
                    raise
                unreadable.append(f"link {link} {name}")
                first_exc = first_exc or exc
                continue
            totals[name] += n
            if n:
                per_link.setdefault(link, {})[name] = n
    seconds = _seconds_counted(ctx)
    t_rate = ctx.thresholds["nvlink.crc_rate_max_per_s"]
    t_rr = ctx.thresholds["nvlink.replay_recovery_max"]
    crc = totals["crc_flit"] + totals["crc_data"]
    worst_rate = (
        max(
            (v.get("crc_flit", 0) + v.get("crc_data", 0) for v in per_link.values()),
            default=0,
        )
        / seconds
        if seconds
        else None
    )
    details: dict[str, object] = {
        "per_link": per_link,
        "seconds_counted": seconds,
        "crc_per_s_worst_link": None if worst_rate is None else round(worst_rate, 3),
    }
    if unreadable:
        details["unreadable"] = unreadable
    rr = totals["replay"] + totals["recovery"]
    if rr > t_rr.value:
        return bad(
            Action.RESET_GPU,
            f"{totals['replay']} NVLink replay and {totals['recovery']} recovery error(s): "
            "DCGM treats any as critical; reset the GPU, isolate if they return",
            measured=totals,
            expected={"replay + recovery": f"<= {t_rr.value:g}"},
            unit="errors",
            source=t_rr.source,
            details=details,
            severity=Severity.CRITICAL,
        )
    if worst_rate is not None and worst_rate >= t_rate.value:
        return bad(
            Action.RESET_GPU,
            f"NVLink CRC errors at {worst_rate:.1f}/s on one link (over {seconds:g} s since "
            f"the driver loaded): at or above DCGM's {t_rate.value:g}/s",
            measured=totals,
            expected={"crc_per_s": f"< {t_rate.value:g}"},
            unit="errors",
            source=t_rate.source,
            details=details,
            severity=Severity.CRITICAL,
        )
    if unreadable and first_exc is not None:
        if mig is None:
            raise first_exc  # a counter that cannot be read is never 'zero, pass'
        details["mig"] = True  # MIG turned the links off: nothing to read is expected
        if len(unreadable) == len(links) * len(NVLINK_COUNTERS):
            return skip(f"{mig.note()}: no NVLink counter to judge", source=mig.source,
                        details=details)  # fmt: skip
    if crc:
        rate = f" ({worst_rate:.3f}/s worst link)" if worst_rate is not None else ""
        return warn(
            f"{crc} NVLink CRC error(s){rate}: under DCGM's {t_rate.value:g}/s failure rate",
            measured=totals,
            expected={"crc_per_s": f"< {t_rate.value:g}"},
            unit="errors",
            source=t_rate.source,
            action=Action.RESET_GPU,
            details=details,
        )
    return ok(measured=totals, expected=0, unit="errors", source=DCGM_NVLINK, details=details)
