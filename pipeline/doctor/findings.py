"""A doctor finding: one line, with what to do."""

from __future__ import annotations

from dataclasses import dataclass

OK = "ok"
WARNING = "warning"
BLOCKER = "blocker"


@dataclass(frozen=True)
class Finding:
    # credentials | permissions | quota | capacity | resources | runner | placeholder | packer
    check: str
    status: str  # ok | warning | blocker
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:7} {self.check:11} {self.message}"
        return f"{text} -> {self.fix}" if self.fix else text

    def as_dict(self) -> dict[str, str]:
        return {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "fix": self.fix,
        }


def error_text(exc: Exception) -> str:
    """An SDK error in one line: its ``message`` (Azure's and Google's API errors carry
    one) or its first line, at most 200 characters."""
    return str(getattr(exc, "message", "") or exc).splitlines()[0][:200]


def blockers(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status == BLOCKER]
