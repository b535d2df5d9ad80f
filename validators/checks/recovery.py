"""NVML's own recommended recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)."""

from __future__ import annotations

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok
from imagectl.validators.nvml.calls import FIELD_RECOVERY_ACTION
from imagectl.validators.nvml.fields import field_value
from imagectl.validators.results import Action


@check("gpu.recovery_action", "NVML recommends no recovery action", per_gpu=True)
def recovery_action(ctx: Context, gpu: int) -> Finding:
    """Drivers that lack the field (before R570) raise NOT_SUPPORTED: a skip."""
    value = int(field_value(ctx.nvml, ctx.handles[gpu], FIELD_RECOVERY_ACTION))
    th = ctx.thresholds
    if value == 0:
        return ok(measured="NONE", expected="NONE", source=th.recovery_source)
    name, action = th.recovery_actions.get(value, (f"UNKNOWN({value})", Action.RESET_GPU))
    return bad(
        action,
        f"the driver asks for recovery action {name}",
        measured=name,
        expected="NONE",
        source=th.recovery_source,
    )
