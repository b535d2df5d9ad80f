"""Memory: ECC mode, volatile uncorrectable errors, SRAM/DRAM counters, row remapping
(Ampere and newer) and retired pages (older GPUs)."""

from __future__ import annotations

import pynvml

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.nvml.calls import (
    AGGREGATE,
    CORRECTED,
    DRAM,
    RETIRE_DBE,
    RETIRE_SBE,
    SRAM,
    UNCORRECTED,
    VOLATILE,
    new_struct,
)
from imagectl.validators.nvml.errors import error_name, is_unsupported
from imagectl.validators.results import Action

PRE_AMPERE = {"Maxwell", "Pascal", "Volta", "Turing"}


@check("gpu.ecc.mode", "ECC enabled", per_gpu=True)
def ecc_mode(ctx: Context, gpu: int) -> Finding:
    current = ctx.nvml.nvmlDeviceGetCurrentEccMode(ctx.handles[gpu])
    if current == pynvml.NVML_FEATURE_ENABLED:
        return ok(measured=True, expected=True)
    return bad(
        Action.REBOOT,
        "ECC is disabled: memory errors go undetected; enable it (nvidia-smi -e 1) and reboot",
        measured=False,
        expected=True,
        source="NVIDIA GPU memory error management guide",
    )


@check("gpu.ecc.pending", "No pending ECC mode change", per_gpu=True)
def ecc_pending(ctx: Context, gpu: int) -> Finding:
    h = ctx.handles[gpu]
    current = ctx.nvml.nvmlDeviceGetCurrentEccMode(h)
    pending = ctx.nvml.nvmlDeviceGetPendingEccMode(h)
    if current == pending:
        return ok(measured={"current": current, "pending": pending})
    return bad(
        Action.REBOOT,
        f"ECC mode change pending ({current} -> {pending}): takes effect at the next reboot",
        measured={"current": current, "pending": pending},
        expected="pending == current",
    )


@check("gpu.ecc.volatile_uncorrected", "No volatile uncorrectable ECC errors", per_gpu=True)
def ecc_volatile(ctx: Context, gpu: int) -> Finding:
    t = ctx.thresholds["ecc.volatile_uncorrected_max"]
    n = ctx.nvml.nvmlDeviceGetTotalEccErrors(ctx.handles[gpu], UNCORRECTED, VOLATILE)
    if n <= t.value:
        return ok(measured=n, expected=f"<= {t.value}", unit=t.unit, source=t.source)
    return bad(
        Action.RESET_GPU,
        f"{n} uncorrectable ECC error(s) since the driver loaded: reset the GPU (row "
        "remapping completes at reset)",
        measured=n,
        expected=f"<= {t.value}",
        unit=t.unit,
        source=t.source,
    )


def _counter(
    ctx: Context, gpu: int, err: int, loc: int, missing: list[pynvml.NVMLError]
) -> int | None:
    """The counter, or None (its error kept in ``missing``) when it cannot be read."""
    try:
        value: int = ctx.nvml.nvmlDeviceGetMemoryErrorCounter(ctx.handles[gpu], err, AGGREGATE, loc)
        return int(value)
    except pynvml.NVMLError as exc:
        if is_unsupported(exc):
            missing.append(exc)
            return None
        raise


def _unreadable(missing: list[pynvml.NVMLError]) -> None:
    """A counter that cannot be read is never 'zero, pass': the runner turns its error
    into a skip (the architecture lacks it) or a failure (its peers answer it)."""
    if missing:
        raise missing[0]


_SRAM_RMA = (
    "NVIDIA GPU Memory Error Management, RMA Policy Thresholds for SRAM Failure Modes: the "
    "SRAM Threshold Exceeded flag (more than 2 SEC-DED or 4 parity unique uncorrectable "
    "errors in one address bank) meets the RMA criteria, validated by the field diagnostic; "
    "NVML nvmlDeviceGetSramEccErrorStatus (nvmlEccSramErrorStatus_v1_t.bThresholdExceeded); "
    "DCGM DCGM_FR_SRAM_THRESHOLD"
)


def _sram_status(ctx: Context, gpu: int) -> dict[str, int] | None:
    """NVML's SRAM error status, or None where the driver cannot give it (older drivers:
    FUNCTION_NOT_FOUND; NOT_SUPPORTED; not root: NO_PERMISSION; a structure version the
    driver does not take: ARGUMENT_VERSION_MISMATCH): the counts are then judged alone,
    never as an RMA."""
    status = new_struct("nvmlDeviceGetSramEccErrorStatus")  # version set, as nvml.h asks
    try:
        ctx.nvml.nvmlDeviceGetSramEccErrorStatus(ctx.handles[gpu], status)
    except pynvml.NVMLError as exc:
        if is_unsupported(exc) or isinstance(exc, pynvml.NVMLError_NoPermission):
            return None
        # the binding's structure version is not one this driver takes (driver 580.159.04
        # refused nvidia-ml-py 13.615.71's nvmlEccSramErrorStatus_v1 on a healthy H200,
        # 2026-11-28): the call cannot be made, which says nothing about the GPU
        if error_name(exc) == "ARGUMENT_VERSION_MISMATCH":
            return None
        raise
    return {name: int(getattr(status, name)) for name, _ in status._fields_ if name != "version"}


@check("gpu.ecc.sram", "SRAM ECC: NVIDIA's RMA threshold flag; counters recorded", per_gpu=True)
def ecc_sram(ctx: Context, gpu: int) -> Finding:
    """RMA only on NVIDIA's SRAM threshold flag; corrected counts are never an RMA criterion
    and uncorrectable ones under the flag's threshold are a warning (recorded)."""
    status = _sram_status(ctx, gpu)
    if status is not None and status.get("bThresholdExceeded"):
        return bad(
            Action.ISOLATE_RMA,
            "NVIDIA's SRAM threshold is exceeded (nvmlEccSramErrorStatus bThresholdExceeded): "
            "the GPU meets NVIDIA's RMA criteria for SRAM; isolate it and run the field "
            "diagnostic",
            measured={"threshold_exceeded": True, **status},
            expected={"threshold_exceeded": False},
            source=_SRAM_RMA,
        )
    missing: list[pynvml.NVMLError] = []
    corr = _counter(ctx, gpu, CORRECTED, SRAM, missing)
    unc = _counter(ctx, gpu, UNCORRECTED, SRAM, missing)
    tc = ctx.thresholds["ecc.sram_correctable_max"]
    tu = ctx.thresholds["ecc.sram_uncorrectable_max"]
    measured: dict[str, object] = {"correctable": corr, "uncorrectable": unc}
    if status is not None:
        measured["threshold_exceeded"] = False
    expected = {"threshold_exceeded": False}
    details = {
        "warn_at": {"correctable": f"> {tc.value}", "uncorrectable": f"> {tu.value}"},
        "status": status,
    }
    if (unc or 0) > tu.value or (corr or 0) > tc.value:
        return warn(
            f"SRAM ECC: {corr} correctable, {unc} uncorrectable (aggregate), NVIDIA's SRAM "
            "RMA threshold "
            + ("not exceeded" if status is not None else "not readable on this driver")
            + ": recorded, not an RMA",
            measured=measured,
            expected=expected,
            unit="errors",
            source=f"{_SRAM_RMA}; imagectl policy: {tu.reason}",
            details=details,
        )
    _unreadable(missing)
    return ok(
        measured=measured, expected=expected, unit="errors", source=_SRAM_RMA, details=details
    )


@check("gpu.ecc.dram", "DRAM ECC counters (recorded; RMA follows the row-remap flag)", per_gpu=True)
def ecc_dram(ctx: Context, gpu: int) -> Finding:
    """Counts of (mostly corrected) DRAM errors warn; NVIDIA's DRAM RMA criterion is the
    row-remapping failure flag (gpu.row_remap.failure)."""
    missing: list[pynvml.NVMLError] = []
    corr = _counter(ctx, gpu, CORRECTED, DRAM, missing)
    unc = _counter(ctx, gpu, UNCORRECTED, DRAM, missing)
    t = ctx.thresholds["ecc.dram_total_max"]
    total = (corr or 0) + (unc or 0)
    measured = {"correctable": corr, "uncorrectable": unc}
    if total > t.value:
        return warn(
            f"{total} DRAM ECC errors (aggregate): recorded; NVIDIA's DRAM RMA criterion is "
            "the row-remapping failure flag (gpu.row_remap.failure)",
            measured=measured,
            expected=f"<= {t.value}",
            unit=t.unit,
            source=f"{_REMAP_SRC}; imagectl policy: {t.reason} ({t.source})",
        )
    _unreadable(missing)
    return ok(measured=measured, expected=f"<= {t.value}", unit=t.unit, source=t.source)


def _remapped(ctx: Context, gpu: int) -> tuple[int, int, int, int] | None:
    """None on a pre-Ampere GPU; NOT_SUPPORTED elsewhere goes to the runner (Ampere and
    newer must answer, data/nvml.yaml min_arch)."""
    arch = _arch(ctx)
    try:
        corr, unc, pending, failure = ctx.nvml.nvmlDeviceGetRemappedRows(ctx.handles[gpu])
        return int(corr), int(unc), int(pending), int(failure)
    except pynvml.NVMLError as exc:
        if is_unsupported(exc) and arch in PRE_AMPERE:
            return None
        raise


def _arch(ctx: Context) -> str | None:
    hw = ctx.expect.hardware
    return hw.arch if hw else None


_REMAP_SRC = "NVIDIA GPU memory error management guide (row remapping, Ampere and newer)"


@check("gpu.row_remap.pending", "No row remapping pending", per_gpu=True)
def remap_pending(ctx: Context, gpu: int) -> Finding:
    rows = _remapped(ctx, gpu)
    if rows is None:
        return skip("row remapping not supported (pre-Ampere GPU: see gpu.retired_pages)")
    if rows[2]:
        return bad(
            Action.RESET_GPU,
            "a row remap is pending: reset the GPU to apply it",
            measured=True,
            expected=False,
            source=_REMAP_SRC,
        )
    return ok(measured=False, expected=False, source=_REMAP_SRC)


@check("gpu.row_remap.failure", "No row remapping failure", per_gpu=True)
def remap_failure(ctx: Context, gpu: int) -> Finding:
    rows = _remapped(ctx, gpu)
    if rows is None:
        return skip("row remapping not supported (pre-Ampere GPU)")
    if rows[3]:
        return bad(
            Action.ISOLATE_RMA,
            "row remapping failed (a bank ran out of spare rows): isolate the GPU and RMA it",
            measured=True,
            expected=False,
            source=_REMAP_SRC,
        )
    return ok(measured=False, expected=False, source=_REMAP_SRC)


@check("gpu.row_remap.uncorrectable", "Uncorrectable remapped rows under threshold", per_gpu=True)
def remap_uncorrectable(ctx: Context, gpu: int) -> Finding:
    rows = _remapped(ctx, gpu)
    if rows is None:
        return skip("row remapping not supported (pre-Ampere GPU)")
    t = ctx.thresholds["row_remap.uncorrectable_rows_max"]
    measured = {"correctable": rows[0], "uncorrectable": rows[1]}
    if rows[1] > t.value:
        return bad(
            Action.ISOLATE_RMA,
            f"{rows[1]} rows remapped for uncorrectable errors",
            measured=measured,
            expected=f"<= {t.value}",
            unit=t.unit,
            source=t.source,
        )
    return ok(measured=measured, expected=f"<= {t.value}", unit=t.unit, source=t.source)


@check(
    "gpu.retired_pages", "Retired pages under threshold, none pending (pre-Ampere)", per_gpu=True
)
def retired_pages(ctx: Context, gpu: int) -> Finding:
    arch = _arch(ctx)
    if arch is not None and arch not in PRE_AMPERE:
        return skip(f"{arch} uses row remapping instead of page retirement")
    h = ctx.handles[gpu]
    try:
        sbe = ctx.nvml.nvmlDeviceGetRetiredPages(h, RETIRE_SBE)
        dbe = ctx.nvml.nvmlDeviceGetRetiredPages(h, RETIRE_DBE)
        pending = ctx.nvml.nvmlDeviceGetRetiredPagesPendingStatus(h)
    except pynvml.NVMLError as exc:
        if is_unsupported(exc):
            return skip("page retirement not supported (Ampere or newer: see gpu.row_remap.*)")
        raise
    t = ctx.thresholds["retired_pages.max"]
    total = len(sbe) + len(dbe)
    measured = {"retired": total, "pending": bool(pending)}
    if pending:
        return bad(
            Action.REBOOT,
            "a page retirement is pending: reboot to apply it",
            measured=measured,
            source=t.source,
        )
    if total > t.value:
        return bad(
            Action.ISOLATE_RMA,
            f"{total} retired pages",
            measured=measured,
            expected=f"<= {t.value}",
            unit=t.unit,
            source=t.source,
        )
    return ok(measured=measured, expected=f"<= {t.value}", unit=t.unit, source=t.source)
