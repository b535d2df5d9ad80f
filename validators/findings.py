"""What a check returns: one ``Finding`` per judgement, built with ``ok``, ``bad``,
``warn`` or ``skip``.

Its own module (not ``checks/``) so the NVML and host layers that judge a reading can
return findings without importing the check registry, which loads every check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imagectl.validators.results import Action, Outcome, Severity


@dataclass
class Finding:
    outcome: Outcome
    message: str = ""
    measured: object = None
    expected: object = None
    unit: str | None = None
    source: str | None = None
    action: Action = Action.NONE
    details: dict[str, object] = field(default_factory=dict)
    severity: Severity | None = None
    gpu: int | None = None


def ok(message: str = "", **kw: Any) -> Finding:
    return Finding(Outcome.PASS, message, **kw)


def bad(action: Action, message: str, **kw: Any) -> Finding:
    return Finding(Outcome.FAIL, message, action=action, **kw)


def warn(message: str, **kw: Any) -> Finding:
    return Finding(Outcome.WARN, message, **kw)


def skip(reason: str, **kw: Any) -> Finding:
    return Finding(Outcome.SKIP, reason, **kw)
