"""Kernel log of the current boot: XIDs and SXids, judged by incident through NVIDIA's Xid
Catalog (validators/data/xids.yaml).

- Only the current boot counts (``host.kernel_log.current_boot``).
- One incident per code and GPU, however many lines (or NVLink links) report it;
  application XIDs count one incident per process.
- IGNORE codes are recorded, never failing; application-attributable codes (RESTART_APP)
  warn naming the process, and fail only on a burst or a recurrence.
- Within one boot the strongest machine action is RESET_GPU or REBOOT (or what the latest
  Xid 154 line names: it replaces the action of the lines before it); buckets that need
  hands (CHECK_MECHANICALS, UPDATE_SWFW) drain; ISOLATE_RMA only for a fault that the
  previous boot's receipt shows on the same GPU too, where the
  catalog sends such a fault to the vendor.
- SXids: the line's own severity word (Fatal / Non-fatal / Correctable, or the driver's
  "Severity <n>" line) decides, through the Fabric Manager User Guide's recovery
  (``xids.yaml`` ``sxids``); the code's name comes from the driver's headers.
- ``kernel.messages``: what the driver logs without an Xid (a GPU fallen off the bus at
  probe, RmInitAdapter failed, NVLink training in the NVLink core, an NVSwitch that fails
  to initialise), read as the driver's source writes it (``data/kernel_messages.yaml``).
- A kernel log that cannot be read (or a check that hangs reading it) fails with DRAIN:
  unknown XIDs are never a pass.
"""

from __future__ import annotations

from imagectl.validators.catalogs import XidEntry
from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.host.boot_history import PreviousBoot, previous_boot, read_folder
from imagectl.validators.host.kernel_log import Event, parse_events, split_boots
from imagectl.validators.host.kernel_messages import Seen, find_messages
from imagectl.validators.results import Action, Outcome, Severity


def _fact(ctx: Context, name: str) -> object:
    try:
        return ctx.fact(name)
    except Exception:  # not recorded (an older snapshot) or not gatherable here
        return None


def _booted_at(ctx: Context) -> float | None:
    boot = _fact(ctx, "boot")
    value = boot.get("booted_at") if isinstance(boot, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _history(ctx: Context) -> tuple[PreviousBoot | None, list[str]]:
    boot = _fact(ctx, "boot")
    boot_id = boot.get("boot_id") if isinstance(boot, dict) else None
    if ctx.history_dir is not None:
        receipts, unreadable = read_folder(ctx.history_dir)
        return previous_boot(receipts, boot_id), unreadable
    recorded = _fact(ctx, "boot_history")
    if isinstance(recorded, list):
        found = [(f"snapshot:boot_history[{i}]", r) for i, r in enumerate(recorded)]
        return previous_boot(found, boot_id), []
    return None, []


def _with_previous_log(prev: PreviousBoot | None, text: str) -> PreviousBoot | None:
    """XIDs of the previous boot in the log itself (a log spanning boots) are evidence
    too, by PCI device (the log names no UUID)."""
    seen = [(e.code, None, e.bus) for e in parse_events(text) if e.kind == "xid"]
    if not seen:
        return prev
    if prev is None:
        return PreviousBoot(None, "", "kernel log: the previous boot's lines", list(seen))
    prev.incidents.extend(seen)
    return prev


def _uuid(ctx: Context, gpu: int | None) -> str | None:
    for g in ctx.gpus:
        if g.get("index") == gpu and isinstance(g.get("uuid"), str):
            return str(g["uuid"])
    return None


def _action(ctx: Context, entry: XidEntry, e: Event, codes_here: set[int]) -> Action:
    action = entry.action
    if entry.parse_action:  # Xid 154: the action its latest line names
        # each line says the recovery action changed from one value to another: the last
        # one is the GPU's action now (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION reads the same),
        # so an earlier 'Node Reboot Required' that a later 'None' replaced is history
        named = [a for t in e.texts if (a := ctx.xids.action_from_text(t)) is not None]
        action = named[-1] if named else action
    if entry.severity_text:  # Xid 144-150: NVIDIA's decode sheet, else the Fatal word
        named = [a for t in e.texts if (a := _nvlink5_action(ctx, e.code, t)) is not None]
        action = max(named, key=lambda a: a.rank) if len(named) == len(e.texts) else action
    if entry.with_codes and entry.with_action and codes_here & set(entry.with_codes):
        action = entry.with_action
    return action


def _nvlink5_action(ctx: Context, code: int, text: str) -> Action | None:
    """One Xid 144-150 line: the action of the decode row its IntrInfo and Error Status
    select (IGNORE and XID_154_EVAL rows: none of their own); a line no row matches, by
    its Fatal / Nonfatal word; None when it says neither (then the Xid's own action)."""
    row = ctx.xids.decode_nvlink5(code, text)
    return row.action if row is not None else ctx.xids.action_from_severity(text)


def _nvlink5_details(ctx: Context, e: Event) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for t in e.texts:
        row = ctx.xids.decode_nvlink5(e.code, t)
        out.append(
            {
                "unit": row.unit,
                "resolution": row.resolution,
                "severity": row.severity,
                "investigatory": row.investigatory,
                "source": row.source,
            }
            if row is not None
            else {
                "resolution": None,
                "why": "no row of NVIDIA's decode sheet matches: judged by "
                "the line's Fatal / Nonfatal word",
            }
        )
    return out


UNREAD = Action.DRAIN
UNREAD_SOURCE = (
    "imagectl policy: the XIDs (NVIDIA Xid Catalog) and SXids (NVIDIA Fabric Manager User "
    "Guide) of this boot are the first evidence of most GPU and NVSwitch faults; a host is "
    "not cleared on evidence that could not be read (DRAIN: a person reads the log)"
)


def _judge(ctx: Context, kind: str) -> list[Finding]:
    log = ctx.kernel_log()
    label = "XID" if kind == "xid" else "SXid"
    if log.error:
        return [
            bad(
                UNREAD,
                f"cannot read the kernel log ({log.error}): this boot's {label}s are unknown; "
                "run the validator as root or pass --kernel-log",
                source=UNREAD_SOURCE,
                details={"log_source": log.source, "error": log.error},
            )
        ]
    text, previous_text, dropped = split_boots(log.text, _booted_at(ctx))
    mine = [e for e in parse_events(text) if e.kind == kind]
    earlier = f"; {dropped} line(s) of earlier boots not judged" if dropped else ""
    if not mine:
        return [ok(f"no {label} in this boot ({log.source}){earlier}", measured=0)]
    if kind == "sxid":
        return [_sxid(ctx, e) for e in mine]
    prev, unreadable = _history(ctx)
    prev = _with_previous_log(prev, previous_text)
    codes_on: dict[str, set[int]] = {}
    for e in mine:
        codes_on.setdefault(e.bus, set()).add(e.code)
    failing_buses = {
        e.bus
        for e in mine
        if not ctx.xids.lookup(kind, e.code).ignore
        and not ctx.xids.lookup(kind, e.code).follows_other
    }
    return [
        _xid(ctx, e, codes_on[e.bus] - {e.code}, e.bus in failing_buses, prev, unreadable)
        for e in mine
    ]


def _xid(
    ctx: Context,
    e: Event,
    others_here: set[int],
    other_failing_here: bool,
    prev: PreviousBoot | None,
    unreadable: list[str],
) -> Finding:
    entry = ctx.xids.lookup("xid", e.code)
    gpu = ctx.gpu_index_for_bus(e.bus)
    uuid = _uuid(ctx, gpu)
    action = _action(ctx, entry, e, others_here)
    recurring = prev is not None and prev.had(e.code, uuid, e.bus)
    where = f" ({', '.join(e.instances)})" if e.instances else ""
    who = ", ".join(e.processes) if e.processes else "process not named in the log"
    text = f"XID {e.code} {entry.mnemonic or ''} on {e.bus}{where} x{e.count}: {entry.meaning}"
    text = text.replace("  ", " ")
    incidents = e.incidents if entry.app else 1
    measured = {"code": e.code, "device": e.bus, "count": e.count, "incidents": incidents}
    details: dict[str, object] = {
        "meaning": entry.meaning,
        "mnemonic": entry.mnemonic,
        "catalog_bucket": entry.bucket,
        "lines": e.lines,
        "known": entry.known,
        "processes": e.processes,
        "gpu_uuid": uuid,
    }
    source = entry.source
    if entry.severity_text:
        decoded = _nvlink5_details(ctx, e)
        details["nvlink5_decode"] = decoded
        rows = sorted({str(d["source"]) for d in decoded if d.get("source")})
        source = "; ".join([source, *rows])
    if e.instances:
        details["mig_instances"] = e.instances
    if prev is not None:
        details["previous_boot"] = {
            "boot_id": prev.boot_id,
            "receipt": prev.origin,
            "same_fault": recurring,
        }
    if unreadable:
        details["history_unreadable"] = unreadable
    info = {"measured": measured, "source": source, "details": details, "gpu": gpu}
    if entry.ignore and entry.app:  # IGNORE, but the application's fault: say whose
        return warn(f"{text}: the application faulted ({who}); nothing to do on the host", **info)
    if entry.ignore or action == Action.NONE:
        reason = "informational, ignored" if entry.ignore else "no action needed"
        return ok(f"{text} ({reason})", severity=Severity.INFO, **info)
    if entry.follows_other and other_failing_here:
        return ok(f"{text} (follows another XID on this GPU)", severity=Severity.INFO, **info)
    if entry.app:
        burst = ctx.xids.app_burst
        info["source"] = f"{entry.source}; {burst.source}"
        if recurring:
            return bad(
                burst.recurrence_action,
                f"{text}: again after the previous boot ({who}); the same GPU keeps "
                "faulting, reset it and run diagnostics",
                **info,
            )
        if e.incidents >= burst.incidents:
            return bad(
                burst.action,
                f"{text}: a burst of {e.incidents} processes in this boot ({who})",
                **info,
            )
        return warn(f"{text}: the application faulted ({who}); restart it", **info)
    if recurring and entry.recurrence_action is not None:
        return bad(
            entry.recurrence_action,
            f"{text}: again after the reboot since the previous boot's receipt "
            f"({prev.origin if prev else '?'}); the reset/reboot did not clear it",
            **info,
        )
    return bad(action, text, **info)


def _sxid(ctx: Context, e: Event) -> Finding:
    entry = ctx.xids.lookup("sxid", e.code)
    policy = ctx.xids.sxid
    named = [sev for t in e.texts if (sev := policy.severity_of(t)) is not None]
    sev = policy.strongest(named)
    word = sev.word or "no severity named"
    measured = {"code": e.code, "device": e.bus, "count": e.count, "severity": word}
    details: dict[str, object] = {
        "name": entry.meaning,
        "lines": e.lines,
        "known": entry.known,
        "names_source": entry.source,
    }
    text = f"SXid {e.code} ({entry.meaning}) on NVSwitch {e.bus} x{e.count}: {word}"
    info = {"measured": measured, "source": sev.source, "details": details}
    if sev.outcome == Outcome.PASS:
        return ok(f"{text} (corrected, informational)", severity=Severity.INFO, **info)
    if sev.outcome == Outcome.WARN:
        return warn(f"{text}: informational, CUDA jobs keep running", **info)
    gpus = sorted(g["index"] for g in ctx.gpus if isinstance(g.get("index"), int))
    details["reset_gpus"] = gpus
    if sev.persists is not None:
        details["if_it_persists"] = sev.persists.value
    then = f", then {sev.persists.value.lower()} if it persists" if sev.persists else ""
    return bad(
        sev.action,
        f"{text}: reset the GPUs and NVSwitches of the baseboard (GPUs {gpus}){then}",
        **info,
    )


def _no_nvswitch(ctx: Context) -> bool:
    """The shape positively has no NVSwitch (no SXids can exist)."""
    hw = ctx.expect.hardware
    return hw is not None and not hw.nvswitch


@check(
    "kernel.xid",
    "No actionable XID in this boot's kernel log",
    needs_nvml=False,
    timeout_action=UNREAD,
    timeout_s=15.0,
)
def xids(ctx: Context) -> list[Finding]:
    return _judge(ctx, "xid")


@check(
    "kernel.sxid",
    "No actionable NVSwitch SXid in this boot's kernel log",
    needs_nvml=False,
    timeout_action=UNREAD,
    timeout_s=15.0,
)
def sxids(ctx: Context) -> list[Finding]:
    if _no_nvswitch(ctx):
        return [skip("no NVSwitch on this shape: no SXids")]
    return _judge(ctx, "sxid")


@check(
    "kernel.messages",
    "No GPU fault the driver logs without an Xid (fallen off the bus at probe, RmInitAdapter "
    "failed, NVLink training, NVSwitch init)",
    needs_nvml=False,
    timeout_action=UNREAD,
    timeout_s=15.0,
)
def driver_messages(ctx: Context) -> list[Finding]:
    log = ctx.kernel_log()
    if log.error:  # kernel.xid fails for it (DRAIN): one failure for one unread log
        return [
            skip(
                f"cannot read the kernel log ({log.error}): kernel.xid fails for it",
                details={"root_cause": "kernel.xid", "log_source": log.source},
            )
        ]
    text, previous_text, _dropped = split_boots(log.text, _booted_at(ctx))
    found = find_messages(text)
    if not found:
        return [ok(f"none of the driver's fault messages in this boot ({log.source})", measured=0)]
    before = {(s.message.id, s.bus) for s in find_messages(previous_text)}
    xids_on = {(e.code, e.bus) for e in parse_events(text) if e.kind == "xid"}
    out = []
    for seen in found:
        out.append(_driver_message(ctx, seen, (seen.message.id, seen.bus) in before, xids_on))
    return out


def _driver_message(
    ctx: Context, seen: Seen, recurring: bool, xids_on: set[tuple[int, str]]
) -> Finding:
    msg = seen.message
    gpu = ctx.gpu_index_for_bus(seen.bus) if seen.bus else None
    where = f"GPU {seen.bus}" if seen.bus else "the host"
    init = seen.inits[-1] if seen.inits else None
    action, why = msg.action_for(init)
    measured = {"message": msg.id, "device": seen.bus, "count": seen.count}
    details: dict[str, object] = {"lines": seen.lines, "meaning": msg.meaning}
    if init is not None:
        details["init_status"] = init
    info = {"measured": measured, "source": msg.source, "details": details, "gpu": gpu}
    text = f"{msg.id} on {where} x{seen.count}: {msg.meaning}"
    if msg.unless_xid is not None and seen.bus and (msg.unless_xid, seen.bus) in xids_on:
        return ok(
            f"{text} (the same incident as its Xid {msg.unless_xid}, judged by kernel.xid)",
            severity=Severity.INFO,
            **info,
        )
    if recurring and msg.recurrence is not None and action != Action.BLOCK_IMAGE:
        return bad(
            msg.recurrence,
            f"{text}: the previous boot logged it too; the reboot did not clear it",
            **info,
        )
    return bad(action, f"{text}" + (f" ({why})" if why else ""), **info)
