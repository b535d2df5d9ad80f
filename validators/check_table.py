"""Every registered check, one row each, for the docs' check table and the registry test.

Importing this module imports every stage that declares checks (the session imports the
host checks, compute, collectives, DCGM, coverage and the baseline; the fabric run's checks
are declared beside its floors), so the registry is complete when ``every_check`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagectl.validators import session
from imagectl.validators.collectives import interconnect
from imagectl.validators.registry import REGISTRY, Runs, Spec
from imagectl.validators.results import Action, Severity

# the modules whose import declares the checks (kept referenced for the reader)
DECLARING = (session, interconnect)


@dataclass(frozen=True)
class CheckRow:
    """One check as the docs list it. A family's ``id`` is its prefix ("dcgm.") and its
    ``members`` the known ids with their titles."""

    id: str
    title: str
    action: Action
    severity: Severity
    runs: Runs
    profiles: tuple[str, ...]
    members: tuple[tuple[str, str], ...] = ()

    @property
    def is_family(self) -> bool:
        return self.id.endswith(".")


def _row(spec: Spec) -> CheckRow:
    return CheckRow(
        id=spec.id,
        title=spec.title,
        action=spec.failure_action,
        severity=spec.severity,
        runs=spec.runs,
        profiles=tuple(p for p in ("boot", "quick", "full", "burn") if p in spec.profiles),
        members=tuple(spec.members()) if spec.is_family and spec.members else (),
    )


def every_check() -> list[CheckRow]:
    """Every registered check in registration order (the runner's checks first, in run
    order), families as one row each with their known members."""
    return [_row(spec) for spec in REGISTRY.values()]
