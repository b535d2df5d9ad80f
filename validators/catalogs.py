"""Loaders for the validator's data files (validators/data/*.yaml), read once per process."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.results import Action, Outcome

DATA = Path(__file__).parent / "data"


def _load(name: str) -> Any:
    path = DATA / name
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise UserError(f"{path}: cannot load validator data: {exc}") from exc


@dataclass(frozen=True)
class Threshold:
    key: str
    value: float
    unit: str
    source: str
    authority: str = "imagectl"  # nvidia: NVIDIA sets it; imagectl: this project's policy
    reason: str = ""  # why, for imagectl policy


AUTHORITIES = ("nvidia", "imagectl")


@dataclass(frozen=True)
class ClockEvent:
    bit: int
    name: str
    outcome: Outcome
    action: Action
    source: str


@dataclass(frozen=True)
class RecoveryValue:
    name: str
    action: Action
    source: str


@dataclass(frozen=True)
class Thresholds:
    values: dict[str, Threshold]
    clock_events: tuple[ClockEvent, ...]
    recovery_actions: dict[int, RecoveryValue]
    recovery_source: str
    recovery_unknown: RecoveryValue

    def __getitem__(self, key: str) -> Threshold:
        return self.values[key]

    def recovery(self, value: int) -> RecoveryValue:
        """NVML's recovery action ``value``; a value newer than the table is never weaker
        than a reboot (``data/recovery_actions.yaml`` ``unknown``)."""
        known = self.recovery_actions.get(value)
        if known is not None:
            return known
        u = self.recovery_unknown
        return RecoveryValue(f"UNKNOWN({value})", u.action, u.source)


@lru_cache(maxsize=1)
def thresholds() -> Thresholds:
    doc = _load("thresholds.yaml")
    values = {
        k: Threshold(
            k,
            v["value"],
            str(v.get("unit", "")),
            v["source"],
            str(v.get("authority", "imagectl")),
            str(v.get("reason", "")),
        )
        for k, v in doc["thresholds"].items()
    }
    events = tuple(
        ClockEvent(
            int(e["bit"]), e["name"], Outcome(e["outcome"]), Action(e["action"]), e["source"]
        )
        for e in doc["clock_events"]
    )
    rec = _load("recovery_actions.yaml")
    actions = {
        int(k): RecoveryValue(v["name"], Action(v["action"]), v.get("source", rec["source"]))
        for k, v in rec["values"].items()
    }
    unknown = rec["unknown"]
    if Action(unknown["action"]).rank < Action.REBOOT.rank:
        raise UserError(
            f"{DATA / 'recovery_actions.yaml'}: unknown.action {unknown['action']} is weaker "
            "than REBOOT; an NVML recovery action this validator cannot name must not be"
        )
    return Thresholds(
        values,
        events,
        actions,
        rec["source"],
        RecoveryValue("UNKNOWN", Action(unknown["action"]), unknown["source"]),
    )


@dataclass(frozen=True)
class XidEntry:
    code: int
    meaning: str
    action: Action
    source: str
    ignore: bool = False
    follows_other: bool = False
    parse_action: bool = False
    known: bool = True
    mnemonic: str = ""
    bucket: str = ""
    app: bool = False  # application-attributable (RESTART_APP): warn, fail on a burst
    recurrence_action: Action | None = None  # the same fault in the previous boot too
    with_codes: tuple[int, ...] = ()  # another code on the same GPU changes the action
    with_action: Action | None = None
    severity_text: bool = False  # the message says Fatal / Nonfatal (Xid 144-150)


@dataclass(frozen=True)
class AppBurst:
    incidents: int
    action: Action
    recurrence_action: Action
    source: str


@dataclass(frozen=True)
class SxidSeverity:
    """What one SXid severity word means (``xids.yaml`` ``sxids.severities``)."""

    word: str  # "Fatal", "Non-fatal", "Correctable"; "" for a line naming none
    outcome: Outcome
    action: Action
    source: str
    persists: Action | None = None  # the action when it persists (Fatal: REBOOT)


@dataclass(frozen=True)
class SxidPolicy:
    severities: tuple[SxidSeverity, ...]  # strongest first
    numbers: dict[int, str]  # "Severity <n>" -> word
    unworded: SxidSeverity
    source: str

    def severity_of(self, text: str) -> SxidSeverity | None:
        """The severity an SXid line's text names: its first word ("Fatal, Link 12 ...")
        or the driver's "Severity <n> Engine instance ..." line; None when it names none
        (e.g. the "Data {...}" line)."""
        words = text.replace(",", " ").split()
        if not words:
            return None
        word = words[0]
        if word.lower() == "severity" and len(words) > 1 and words[1].isdigit():
            word = self.numbers.get(int(words[1]), "")
        for sev in self.severities:
            if word.lower() == sev.word.lower():
                return sev
        return None

    def strongest(self, found: list[SxidSeverity]) -> SxidSeverity:
        if not found:
            return self.unworded
        return min(found, key=lambda s: self.severities.index(s))


_INTR = re.compile(r"\((0x[0-9A-Fa-f]{1,8})\s+(0x[0-9A-Fa-f]{1,8})\b")


@dataclass(frozen=True)
class NvlinkRow:
    """One row of NVIDIA's "XID 144-150 Decode" sheet (``data/xid_nvlink5.yaml``)."""

    xid: int
    unit: str
    intrinfo_v1: str  # 32 characters, bit 31 first: 1 set, 0 clear, - either
    intrinfo_v2: str
    error_status: int
    resolution: str  # the sheet's Data Center Recovery Action bucket
    action: Action
    severity: str
    investigatory: str
    source: str

    def matches(self, xid: int, intrinfo: int, status: int) -> bool:
        return (
            xid == self.xid
            and status == self.error_status
            and (_bits_match(self.intrinfo_v2, intrinfo) or _bits_match(self.intrinfo_v1, intrinfo))
        )


def _bits_match(pattern: str, value: int) -> bool:
    for i, ch in enumerate(pattern):
        bit = (value >> (31 - i)) & 1
        if (ch == "1" and not bit) or (ch == "0" and bit):
            return False
    return True


def intrinfo_of(text: str) -> tuple[int, int] | None:
    """(IntrInfo, Error Status): the first two numbers in an Xid 144-150 line's parentheses."""
    m = _INTR.search(text)
    return (int(m[1], 16), int(m[2], 16)) if m else None


@dataclass(frozen=True)
class XidCatalog:
    xids: dict[int, XidEntry]
    unknown_xid: XidEntry
    sxids: dict[int, XidEntry]
    unknown_sxid: XidEntry
    recovery_text: tuple[tuple[str, Action], ...]
    source: str
    app_burst: AppBurst
    severity_text: tuple[tuple[str, Action], ...] = ()
    sxid_policy: SxidPolicy | None = None
    nvlink5: tuple[NvlinkRow, ...] = ()

    def decode_nvlink5(self, code: int, text: str) -> NvlinkRow | None:
        """Xid 144-150: the row of NVIDIA's decode sheet the line's IntrInfo and Error
        Status select; None when the line carries neither or no row matches."""
        found = intrinfo_of(text)
        if found is None:
            return None
        return next((r for r in self.nvlink5 if r.matches(code, *found)), None)

    def lookup(self, kind: str, code: int) -> XidEntry:
        known = self.sxids if kind == "sxid" else self.xids
        unknown = self.unknown_sxid if kind == "sxid" else self.unknown_xid
        return known.get(code) or XidEntry(
            code, unknown.meaning, unknown.action, unknown.source, known=False
        )

    @property
    def sxid(self) -> SxidPolicy:
        assert self.sxid_policy is not None
        return self.sxid_policy

    def action_from_text(self, text: str) -> Action | None:
        """Xid 154 names the new recovery action in its text."""
        tail = text.split(" to ", 1)[-1]
        for match, action in self.recovery_text:
            if match.lower() in tail.lower():
                return action
        return None

    def action_from_severity(self, text: str) -> Action | None:
        """Xid 144-150: 'NETIR_LINK_EVT Fatal XC0 ...' / '... Nonfatal ...'."""
        words = text.replace(",", " ").split()
        for match, action in self.severity_text:
            if match in words:
                return action
        return None


def _entry(code: int, e: dict[str, Any], default_source: str) -> XidEntry:
    with_codes = e.get("with_codes") or {}
    return XidEntry(
        code=code,
        meaning=e["meaning"],
        action=Action(e["action"]),
        source=e.get("source", default_source),
        ignore=bool(e.get("ignore", False)),
        follows_other=bool(e.get("follows_other", False)),
        parse_action=bool(e.get("parse_action", False)),
        mnemonic=str(e.get("mnemonic", "")),
        bucket=str(e.get("bucket", "")),
        app=bool(e.get("app", False)),
        recurrence_action=Action(e["recurrence"]) if e.get("recurrence") else None,
        with_codes=tuple(int(c) for c in with_codes.get("codes", ())),
        with_action=Action(with_codes["action"]) if with_codes else None,
        severity_text=bool(e.get("severity_text", False)),
    )


def _severity(e: dict[str, object], word: str = "") -> SxidSeverity:
    return SxidSeverity(
        word=str(e.get("match", word)),
        outcome=Outcome(e["outcome"]),
        action=Action(e["action"]),
        source=str(e["source"]),
        persists=Action(e["persists"]) if e.get("persists") else None,
    )


def _sxid_policy(sx: dict[str, Any]) -> SxidPolicy:
    return SxidPolicy(
        severities=tuple(_severity(e) for e in sx["severities"]),
        numbers={int(k): str(v) for k, v in sx["severity_numbers"].items()},
        unworded=_severity(sx["unworded"]),
        source=str(sx["source"]),
    )


def _check_hands(xids: dict[int, XidEntry], hands: dict[str, Any]) -> None:
    """An entry in a bucket that needs hands never ends at a reset or a reboot."""
    floor = Action(hands["action"])
    wrong = [
        f"Xid {code} ({e.bucket}: {e.action.value})"
        for code, e in sorted(xids.items())
        if e.bucket in hands["buckets"] and e.action.rank < floor.rank
    ]
    if wrong:
        raise UserError(
            f"{DATA / 'xids.yaml'}: {', '.join(wrong)} need hands on the machine; a reset or "
            f"a reboot cannot fix them: use {floor.value} or stronger"
        )


def _nvlink5() -> tuple[NvlinkRow, ...]:
    doc = _load("xid_nvlink5.yaml")
    actions = {str(k): Action(v) for k, v in doc["actions"].items()}
    rows = []
    for i, r in enumerate(doc["rows"]):
        for key in ("intrinfo_v1", "intrinfo_v2"):
            if len(r[key]) != 32 or set(r[key]) - set("01-"):
                raise UserError(
                    f"{DATA / 'xid_nvlink5.yaml'}: rows[{i}].{key} {r[key]!r} is not 32 "
                    "characters of 0, 1 and -; copy the pattern from the decode sheet"
                )
        if r["resolution"] not in actions:
            raise UserError(
                f"{DATA / 'xid_nvlink5.yaml'}: rows[{i}] resolution {r['resolution']!r} has no "
                f"action; add it under actions ({', '.join(actions)})"
            )
        rows.append(
            NvlinkRow(
                xid=int(r["xid"]),
                unit=str(r["unit"]),
                intrinfo_v1=r["intrinfo_v1"],
                intrinfo_v2=r["intrinfo_v2"],
                error_status=int(r["error_status"]),
                resolution=str(r["resolution"]),
                action=actions[r["resolution"]],
                severity=str(r["severity"]),
                investigatory=str(r["investigatory"]),
                source=str(r["source"]),
            )
        )
    return tuple(rows)


@lru_cache(maxsize=1)
def xid_catalog() -> XidCatalog:
    doc = _load("xids.yaml")
    src = doc["source"]
    sx = doc["sxids"]
    names = _load("sxids.yaml")
    unknown = doc["unknown"]
    burst = doc["app_burst"]
    policy = _sxid_policy(sx)
    xids = {int(k): _entry(int(k), v, src) for k, v in doc["xids"].items()}
    _check_hands(xids, doc["hands"])
    return XidCatalog(
        xids=xids,
        unknown_xid=XidEntry(
            0, unknown["meaning"], Action(unknown["action"]), unknown["source"], known=False
        ),
        sxids={
            int(k): XidEntry(int(k), str(name), policy.unworded.action, names["source"])
            for k, name in names["codes"].items()
        },
        unknown_sxid=XidEntry(
            0,
            "SXid not in the NVSwitch driver's headers (a newer driver)",
            policy.unworded.action,
            names["source"],
            known=False,
        ),
        recovery_text=tuple((r["match"], Action(r["action"])) for r in doc["recovery_text"]),
        source=src,
        app_burst=AppBurst(
            int(burst["incidents"]),
            Action(burst["action"]),
            Action(burst["recurrence_action"]),
            burst["source"],
        ),
        severity_text=tuple((r["match"], Action(r["action"])) for r in doc["severity_text"]),
        sxid_policy=policy,
        nvlink5=_nvlink5(),
    )
