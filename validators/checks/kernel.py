"""Kernel log of the current boot: XIDs and SXids, deduplicated, mapped through the catalog
(validators/data/xids.yaml). Ignorable codes are recorded but never fail the run."""

from __future__ import annotations

from imagectl.validators.checks.base import Finding, bad, check, ok
from imagectl.validators.context import Context
from imagectl.validators.host.kernel_log import Event, parse_events
from imagectl.validators.results import Action, Outcome, Severity


def _judge(ctx: Context, events: list[Event], kind: str) -> list[Finding]:
    log = ctx.kernel_log()
    if log.error:
        return [
            Finding(
                Outcome.ERROR,
                f"cannot read the kernel log ({log.error}): XIDs unknown; run as root or pass "
                "--kernel-log",
            )
        ]
    mine = [e for e in events if e.kind == kind]
    label = "XID" if kind == "xid" else "SXid"
    if not mine:
        return [ok(f"no {label} in this boot ({log.source})", measured=0)]
    failing_gpus = {
        e.bus
        for e in mine
        if not ctx.xids.lookup(kind, e.code).ignore
        and not ctx.xids.lookup(kind, e.code).follows_other
    }
    out: list[Finding] = []
    for e in mine:
        entry = ctx.xids.lookup(kind, e.code)
        gpu = ctx.gpu_index_for_bus(e.bus) if kind == "xid" else None
        action = entry.action
        if entry.parse_action:
            action = ctx.xids.action_from_text(e.text) or action
        if entry.repeat_count and entry.repeat_action and e.count >= entry.repeat_count:
            action = entry.repeat_action
        measured = {"code": e.code, "device": e.bus, "count": e.count}
        details = {"meaning": entry.meaning, "lines": e.lines, "known": entry.known}
        text = f"{label} {e.code} on {e.bus} x{e.count}: {entry.meaning}"
        if entry.ignore:
            out.append(
                ok(
                    f"{text} (informational, ignored)",
                    measured=measured,
                    source=entry.source,
                    details=details,
                    gpu=gpu,
                    severity=Severity.INFO,
                )
            )
        elif entry.follows_other and e.bus in failing_gpus:
            out.append(
                ok(
                    f"{text} (follows another {label} on this device)",
                    measured=measured,
                    source=entry.source,
                    details=details,
                    gpu=gpu,
                    severity=Severity.INFO,
                )
            )
        elif action == Action.NONE:
            out.append(
                ok(
                    text,
                    measured=measured,
                    source=entry.source,
                    details=details,
                    gpu=gpu,
                    severity=Severity.INFO,
                )
            )
        else:
            out.append(
                bad(action, text, measured=measured, source=entry.source, details=details, gpu=gpu)
            )
    return out


@check(
    "kernel.xid",
    "No actionable XID in this boot's kernel log",
    needs_nvml=False,
    timeout_action=Action.NONE,
    timeout_s=15.0,
)
def xids(ctx: Context) -> list[Finding]:
    return _judge(ctx, parse_events(ctx.kernel_log().text), "xid")


@check(
    "kernel.sxid",
    "No actionable NVSwitch SXid in this boot's kernel log",
    needs_nvml=False,
    timeout_action=Action.NONE,
    timeout_s=15.0,
)
def sxids(ctx: Context) -> list[Finding]:
    return _judge(ctx, parse_events(ctx.kernel_log().text), "sxid")
