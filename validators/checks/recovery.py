"""NVML's own recommended recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), mapped by
``data/recovery_actions.yaml``; a value newer than the table is never weaker than a reboot."""

from __future__ import annotations

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok
from imagectl.validators.nvml.calls import FIELD_RECOVERY_ACTION
from imagectl.validators.nvml.fields import field_value


@check("gpu.recovery_action", "NVML recommends no recovery action", per_gpu=True)
def recovery_action(ctx: Context, gpu: int) -> Finding:
    """Drivers that lack the field (before R570) raise NOT_SUPPORTED: a skip."""
    value = int(field_value(ctx.nvml, ctx.handles[gpu], FIELD_RECOVERY_ACTION))
    th = ctx.thresholds
    if value == 0:
        return ok(measured="NONE", expected="NONE", source=th.recovery_source)
    rec = th.recovery(value)
    known = value in th.recovery_actions
    return bad(
        rec.action,
        f"the driver asks for recovery action {rec.name}"
        + ("" if known else " (a value this validator does not know: drain, read the driver's)"),
        measured=rec.name,
        expected="NONE",
        source=rec.source,
        details={"value": value, "known": known},
    )
