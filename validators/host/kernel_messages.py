"""Kernel messages the NVIDIA drivers write without an Xid (``data/kernel_messages.yaml``):
a GPU that fell off the bus at probe, RmInitAdapter failing, NVLink training failing in the
NVLink core, an NVSwitch failing to initialise. Each is read as the driver writes it (the
driver's format string, split over lines where the driver splits it) and carries the
recovery action and the source file and function that print it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from imagectl.core.errors import UserError
from imagectl.validators.catalogs import _load
from imagectl.validators.host.kernel_log import normalise_bus
from imagectl.validators.results import Action


@dataclass(frozen=True)
class InitClass:
    low: int
    high: int
    action: Action
    reason: str


@dataclass(frozen=True)
class Message:
    id: str
    meaning: str
    pattern: re.Pattern[str]
    action: Action
    source: str
    continues: re.Pattern[str] | None = None
    within: int = 1
    recurrence: Action | None = None
    unless_xid: int | None = None
    init_status: tuple[InitClass, ...] = ()

    def action_for(self, init: str | None) -> tuple[Action, str]:
        """The action, and why, for a line whose RmInitAdapter status is ``init``."""
        if init is not None:
            value = int(init, 16)
            for c in self.init_status:
                if c.low <= value <= c.high:
                    return c.action, c.reason
        return self.action, ""


@dataclass
class Seen:
    """One message on one device (or the host, where the line names none), deduplicated."""

    message: Message
    bus: str | None
    count: int = 0
    lines: list[str] = field(default_factory=list)
    inits: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def kernel_messages() -> tuple[Message, ...]:
    doc = _load("kernel_messages.yaml")
    try:
        return tuple(_message(m) for m in doc["messages"])
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise UserError(f"validators/data/kernel_messages.yaml: malformed: {exc}") from exc


def _message(m: dict[str, object]) -> Message:
    def text(key: str) -> str:
        return str(m[key])

    classes = m.get("init_status") or []
    if not isinstance(classes, list):
        raise ValueError(f"{m.get('id')}: init_status is not a list")
    recurrence, unless = m.get("recurrence"), m.get("unless_xid")
    return Message(
        id=text("id"),
        meaning=text("meaning"),
        pattern=re.compile(text("pattern")),
        action=Action(text("action")),
        source=text("source"),
        continues=re.compile(text("continues")) if m.get("continues") else None,
        within=int(str(m.get("within") or 1)),
        recurrence=Action(str(recurrence)) if recurrence else None,
        unless_xid=int(str(unless)) if unless is not None else None,
        init_status=tuple(
            InitClass(
                int(str(c["from"]), 0), int(str(c["to"]), 0), Action(c["action"]), str(c["reason"])
            )
            for c in classes
        ),
    )


def find_messages(text: str) -> list[Seen]:
    """Every catalogued message in ``text``, one per (message, device), in log order."""
    lines = text.splitlines()
    seen: dict[tuple[str, str | None], Seen] = {}
    for i, line in enumerate(lines):
        for msg in kernel_messages():
            m = msg.pattern.search(line)
            if not m:
                continue
            if msg.continues is not None:
                tail = " ".join(lines[i : i + msg.within + 1])
                if not msg.continues.search(tail):
                    continue
            bus = m.groupdict().get("bus")
            key = (msg.id, normalise_bus(bus) if bus else None)
            hit = seen.setdefault(key, Seen(msg, key[1]))
            hit.count += 1
            if len(hit.lines) < 3:
                hit.lines.append(line.strip())
            if m.groupdict().get("init"):
                hit.inits.append(m["init"])
    return list(seen.values())
