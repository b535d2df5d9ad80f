"""Spare rows per DRAM bank (Ampere and newer): NVML's row-remapper histogram counts the banks
by how many of their reserved rows are left (max, high, partial, low, none).

NVIDIA "GPU Memory Error Management", RMA Policy: a remapping attempt for an uncorrectable
error on a bank that already has eight uncorrectable rows remapped sets the row-remapping
failure flag (the RMA criterion, gpu.row_remap.failure). A bank with no reserved row left
cannot absorb its next uncorrectable error: the host drains until NVIDIA's field diagnostic
has looked at the GPU. A bank at "low" warns. An older snapshot without the histogram is
inconclusive, never a pass."""

from __future__ import annotations

import pynvml

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.nvml.errors import error_name
from imagectl.validators.results import Action

SOURCE = (
    "NVML nvmlRowRemapperHistogramValues_t ('classify the remap availability for each bank': "
    "max = all reserved rows available ... none = no reserved rows available); NVIDIA GPU "
    "Memory Error Management, RMA Policy (a remap attempt for an uncorrectable error on a bank "
    "with eight uncorrectable rows remapped sets the row-remapping failure flag)"
)
BUCKETS = ("max", "high", "partial", "low", "none")
PRE_AMPERE = ("Maxwell", "Pascal", "Volta", "Turing")


@check("gpu.row_remap.spare", "Every DRAM bank has spare rows left (row-remapper histogram)",
       per_gpu=True)  # fmt: skip
def spare_rows(ctx: Context, gpu: int) -> Finding:
    hw = ctx.expect.hardware
    try:
        hist = ctx.nvml.nvmlDeviceGetRowRemapperHistogram(ctx.handles[gpu])
    except pynvml.NVMLError as exc:
        name = error_name(exc)
        if hw is not None and hw.arch in PRE_AMPERE:
            return skip("row remapping not supported (pre-Ampere GPU: see gpu.retired_pages)")
        if name in ("FUNCTION_NOT_FOUND", "NOT_SUPPORTED"):
            where = "the snapshot" if ctx.facts.kind != "live" else "the driver"
            return skip(
                f"inconclusive: {where} gives no row-remapper histogram "
                f"(nvmlDeviceGetRowRemapperHistogram: {name}); spare rows are unknown",
                details={"inconclusive": True, "missing": ["nvmlDeviceGetRowRemapperHistogram"]},
            )
        raise
    counts = {b: int(getattr(hist, b, 0) or 0) for b in BUCKETS}
    if counts["none"]:
        return bad(
            Action.DRAIN,
            f"{counts['none']} DRAM bank(s) have no spare rows left: the next uncorrectable "
            "error there cannot be remapped (row-remapping failure, RMA); drain the host and "
            "run NVIDIA's field diagnostic",
            measured=counts,
            expected="no bank at none",
            unit="banks",
            source=SOURCE,
        )
    if counts["low"]:
        return warn(
            f"{counts['low']} DRAM bank(s) have few spare rows left",
            measured=counts,
            expected="no bank at low or none",
            unit="banks",
            source=SOURCE,
        )
    return ok(measured=counts, expected="no bank at none", unit="banks", source=SOURCE)
