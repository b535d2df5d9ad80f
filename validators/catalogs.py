"""Loaders for the validator's data files (validators/data/*.yaml), read once per process."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from imagectl.errors import UserError
from imagectl.validators.results import Action, Outcome

DATA = Path(__file__).parent / "data"


def _load(name: str) -> Any:
    path = DATA / name
    try:
        return YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise UserError(f"{path}: cannot load validator data: {exc}") from exc


@dataclass(frozen=True)
class Threshold:
    key: str
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class ClockEvent:
    bit: int
    name: str
    outcome: Outcome
    action: Action
    source: str


@dataclass(frozen=True)
class Thresholds:
    values: dict[str, Threshold]
    clock_events: tuple[ClockEvent, ...]
    recovery_actions: dict[int, tuple[str, Action]]
    recovery_source: str

    def __getitem__(self, key: str) -> Threshold:
        return self.values[key]


@lru_cache(maxsize=1)
def thresholds() -> Thresholds:
    doc = _load("thresholds.yaml")
    values = {
        k: Threshold(k, v["value"], str(v.get("unit", "")), v["source"])
        for k, v in doc["thresholds"].items()
    }
    events = tuple(
        ClockEvent(
            int(e["bit"]), e["name"], Outcome(e["outcome"]), Action(e["action"]), e["source"]
        )
        for e in doc["clock_events"]
    )
    rec = doc["recovery_actions"]
    actions = {int(k): (v["name"], Action(v["action"])) for k, v in rec["values"].items()}
    return Thresholds(values, events, actions, rec["source"])


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
class XidCatalog:
    xids: dict[int, XidEntry]
    unknown_xid: XidEntry
    sxids: dict[int, XidEntry]
    unknown_sxid: XidEntry
    recovery_text: tuple[tuple[str, Action], ...]
    source: str
    app_burst: AppBurst
    severity_text: tuple[tuple[str, Action], ...] = ()
    sxid_fatal: Action = Action.REBOOT

    def lookup(self, kind: str, code: int) -> XidEntry:
        known = self.sxids if kind == "sxid" else self.xids
        unknown = self.unknown_sxid if kind == "sxid" else self.unknown_xid
        return known.get(code) or XidEntry(
            code, unknown.meaning, unknown.action, unknown.source, known=False
        )

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


@lru_cache(maxsize=1)
def xid_catalog() -> XidCatalog:
    doc = _load("xids.yaml")
    src = doc["source"]
    sx = doc["sxids"]
    unknown = doc["unknown"]
    burst = doc["app_burst"]
    return XidCatalog(
        xids={int(k): _entry(int(k), v, src) for k, v in doc["xids"].items()},
        unknown_xid=XidEntry(
            0, unknown["meaning"], Action(unknown["action"]), unknown["source"], known=False
        ),
        sxids={int(k): _entry(int(k), v, sx["source"]) for k, v in sx["codes"].items()},
        unknown_sxid=XidEntry(
            0, sx["unknown"]["meaning"], Action(sx["unknown"]["action"]), sx["source"], known=False
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
        sxid_fatal=Action(sx["fatal"]["action"]),
    )
