"""The result vocabulary shared by every validator check and by the receipt.

Stable ids, severities, outcomes and recovery actions: what machines read and people act
on. Actions are ordered from least to most drastic; a run's worst action is the maximum.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    ERROR = "error"


class Action(str, Enum):
    """Recommended recovery action, least to most drastic (declaration order)."""

    NONE = "NONE"
    RESTART_APP = "RESTART_APP"
    RESET_GPU = "RESET_GPU"
    REBOOT = "REBOOT"
    DRAIN = "DRAIN"
    ISOLATE_RMA = "ISOLATE_RMA"
    BLOCK_IMAGE = "BLOCK_IMAGE"

    @property
    def rank(self) -> int:
        return list(Action).index(self)

    @classmethod
    def worst(cls, actions: list[Action]) -> Action:
        return max(actions, key=lambda a: a.rank, default=cls.NONE)


class CheckResult(BaseModel):
    """One check's verdict. ``gpu`` is the GPU index for per-GPU checks, else None."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str
    severity: Severity
    outcome: Outcome
    measured: Any = None
    expected: Any = None
    unit: str | None = None
    source: str | None = None
    action: Action = Action.NONE
    duration_s: float = 0.0
    gpu: int | None = None
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Fail and error both count against the host: an error is never a pass."""
        return self.outcome in (Outcome.FAIL, Outcome.ERROR)
