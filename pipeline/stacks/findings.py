"""What a stack check outside the schema reports: a field (its path in the stack file),
a message, what to do and where the rule comes from. ``imagectl lint`` turns each into a
problem with the field's file and line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # error | warning
    loc: tuple[str | int, ...]  # e.g. ("clouds", "gcp", "regions", 1)
    message: str
    fix: str
    source: str
