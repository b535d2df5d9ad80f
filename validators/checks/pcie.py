"""PCIe: the link the GPU can train to (judged at idle), the current link under load, and
the replay counter. Links downtrain at idle to save power, so the current link is judged
only on samples taken under load (quick/full/burn)."""

from __future__ import annotations

from imagectl.validators.checks.base import LOADED_PROFILES, check
from imagectl.validators.checks.thermal import loaded_samples
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.rates import pcie_replay_limit_per_min, per_minute
from imagectl.validators.results import Action

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


def _uptime_s(ctx: Context) -> float | None:
    """The replay counter runs from driver load: the host's uptime is the window."""
    try:
        boot = ctx.fact("boot") or {}
    except Exception:
        return None
    up = boot.get("uptime_s") if isinstance(boot, dict) else None
    return float(up) if isinstance(up, int | float) and up > 0 else None


@check("gpu.pcie.replay", "PCIe replays per minute under DCGM's health-watch limit", per_gpu=True)
def replay(ctx: Context, gpu: int) -> Finding:
    """The counter since driver load over the host's uptime, against the rate DCGM's health
    watch allows for the link's generation and width (validators/rates.py)."""
    h = ctx.handles[gpu]
    n = int(ctx.nvml.nvmlDeviceGetPcieReplayCounter(h))
    t = ctx.thresholds["pcie.replay_ber"]
    gen = int(ctx.nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))
    width = int(ctx.nvml.nvmlDeviceGetMaxPcieLinkWidth(h))
    limit = pcie_replay_limit_per_min(gen, width, float(t.value))
    up = _uptime_s(ctx)
    expected = f"<= {limit} per minute (Gen{gen} x{width})"
    if n == 0:
        return ok(measured=0, expected=expected, unit="replays/min", source=t.source)
    if up is None:
        return warn(
            f"{n} PCIe replays since the driver loaded; the host's uptime is unknown, so the "
            "rate cannot be judged",
            measured=n,
            expected=expected,
            unit="replays",
            source=t.source,
        )
    rate = round(per_minute(n, up), 2)
    details = {"replays": n, "window_s": up, "limit_per_min": limit}
    if rate > limit:
        return bad(
            Action.DRAIN,
            f"{n} PCIe replays in {up:g} s since boot: {rate} per minute, over the {limit} per "
            f"minute DCGM's health watch allows on Gen{gen} x{width} (DCGM_FR_PCI_REPLAY_RATE): "
            "a marginal link; reseat the card, check the slot and riser",
            measured=rate,
            expected=expected,
            unit="replays/min",
            source=t.source,
            details=details,
        )
    return ok(
        measured=rate, expected=expected, unit="replays/min", source=t.source, details=details
    )
