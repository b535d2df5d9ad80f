"""NVML's own recommended recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)."""

from __future__ import annotations

from imagectl.validators.checks.base import Finding, bad, check, ok
from imagectl.validators.context import Context
from imagectl.validators.nvml.calls import FIELD_RECOVERY_ACTION
from imagectl.validators.nvml.fields import field_value


@check("gpu.recovery_action", "NVML recommends no recovery action", per_gpu=True)
def recovery_action(ctx: Context, gpu: int) -> Finding:
    value = int(field_value(ctx.nvml, ctx.handles[gpu], FIELD_RECOVERY_ACTION))
    th = ctx.thresholds
    name, action = th.recovery_actions.get(value, (f"UNKNOWN({value})", None))  # type: ignore[arg-type]
    if value == 0:
        return ok(measured=name, expected="NONE", source=th.recovery_source)
    from imagectl.validators.results import Action

    return bad(
        action or Action.RESET_GPU,
        f"the driver asks for recovery action {name}",
        measured=name,
        expected="NONE",
        source=th.recovery_source,
    )
