"""PCIe: the link the GPU can train to (judged at idle), the current link under load, and
the replay counter. Links downtrain at idle to save power, so the current link is judged
only on samples taken under load (quick/full/burn)."""

from __future__ import annotations

from imagectl.validators.checks.base import LOADED_PROFILES, check
from imagectl.validators.checks.thermal import loaded_samples
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.results import Action, Severity

_WIDTH_SRC = (
    "PCIe Base Specification (ASPM L0s/L1 and speed changes keep the negotiated width); "
    "NVIDIA nvidia-smi -q: the current link generation drops when the GPU is idle, the "
    "width does not: a narrower current width is a degraded link"
)


@check(
    "gpu.pcie.link_max",
    "PCIe link capability matches the shape; current width at its maximum",
    per_gpu=True,
)
def link_max(ctx: Context, gpu: int) -> Finding:
    h = ctx.handles[gpu]
    gen = int(ctx.nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))
    width = int(ctx.nvml.nvmlDeviceGetMaxPcieLinkWidth(h))
    cur_width = int(ctx.nvml.nvmlDeviceGetCurrPcieLinkWidth(h))
    measured = f"Gen{gen} x{width}"
    hw = ctx.expect.hardware
    want_w = max(width, hw.pcie_width) if hw is not None and hw.pcie_width else width
    details = {"current_width": cur_width, "max_width": width}
    if hw is not None and hw.pcie_gen is not None and hw.pcie_width is not None:
        expected = f"Gen{hw.pcie_gen} x{hw.pcie_width}"
        if gen < hw.pcie_gen or width < hw.pcie_width:
            return bad(
                Action.DRAIN,
                f"the GPU's link can only reach {measured} on a {expected} shape (riser, slot "
                "or retimer fault): host<->GPU bandwidth is cut; drain for inspection",
                measured=measured,
                expected=expected,
                source=hw.source,
                details=details,
            )
    if cur_width < want_w:
        return bad(
            Action.DRAIN,
            f"the link trained at x{cur_width} of x{want_w} (the width does not drop at idle, "
            "only the speed does): a lane or retimer fault; drain for inspection",
            measured=f"x{cur_width}",
            expected=f"x{want_w}",
            source=_WIDTH_SRC,
            details=details,
        )
    if hw is None or hw.pcie_gen is None or hw.pcie_width is None:
        return ok(
            "no shape: judged the current width against the link's maximum",
            measured=f"{measured}, current x{cur_width}",
            source=_WIDTH_SRC,
            details=details,
        )
    return ok(
        measured=f"{measured}, current x{cur_width}",
        expected=f"Gen{hw.pcie_gen} x{hw.pcie_width}",
        source=hw.source,
        details=details,
    )


@check(
    "gpu.pcie.link_under_load",
    "PCIe link at full generation and width under load",
    per_gpu=True,
    profiles=LOADED_PROFILES,
)
def link_under_load(ctx: Context, gpu: int) -> Finding:
    samples = loaded_samples(ctx, gpu)
    if not samples:
        return skip("no sample under load (links downtrain at idle, so they are not judged)")
    h = ctx.handles[gpu]
    max_gen = int(ctx.nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))
    max_width = int(ctx.nvml.nvmlDeviceGetMaxPcieLinkWidth(h))
    low = [s for s in samples if s["pcie_gen"] < max_gen or s["pcie_width"] < max_width]
    expected = f"Gen{max_gen} x{max_width}"
    if low:
        worst = min(low, key=lambda s: (s["pcie_gen"], s["pcie_width"]))
        return bad(
            Action.DRAIN,
            f"link at Gen{worst['pcie_gen']} x{worst['pcie_width']} under load in "
            f"{len(low)}/{len(samples)} samples",
            measured=f"Gen{worst['pcie_gen']} x{worst['pcie_width']}",
            expected=expected,
        )
    return ok(f"{len(samples)} samples under load", measured=expected, expected=expected)


@check(
    "gpu.pcie.replay",
    "PCIe replay counter under threshold",
    per_gpu=True,
    severity=Severity.WARNING,
)
def replay(ctx: Context, gpu: int) -> Finding:
    n = int(ctx.nvml.nvmlDeviceGetPcieReplayCounter(ctx.handles[gpu]))
    t = ctx.thresholds["pcie.replay_max"]
    if n > t.value:
        return warn(
            f"{n} PCIe replays since the driver loaded: a marginal link (signal integrity)",
            measured=n,
            expected=f"<= {t.value}",
            unit=t.unit,
            source=t.source,
            action=Action.DRAIN,
        )
    return ok(measured=n, expected=f"<= {t.value}", unit=t.unit, source=t.source)
