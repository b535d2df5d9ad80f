"""The one record every drift source returns, and the report that collects them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from imagectl.headline import could_not_run

SOURCES = ("upstream", "base-images", "replicas", "fleet", "hosts")


@dataclass(frozen=True)
class Finding:
    """One thing that drifted.

    ``kind`` is a stable id (``driver-newer``, ``replica-missing``...) used in tests, JSON
    and issue bodies; ``current`` / ``available`` are what is pinned or expected and what
    was found; ``detail`` says why it matters and what to do.
    """

    source: str
    stack: str
    kind: str
    subject: str
    current: str | None
    available: str | None
    detail: str
    severity: str = "drift"  # drift | warning | info (info never changes the exit code)
    cloud: str | None = None
    region: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def is_drift(self) -> bool:
        return self.severity in ("drift", "warning")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class PinChange:
    """A proposed new value for one pin of a stack file (``path`` into the YAML tree)."""

    path: tuple[str, ...]
    current: str
    proposed: str
    reason: str
    blocked_by: tuple[str, ...] = ()  # compatibility rule ids the change would violate

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    def as_dict(self) -> dict[str, object]:
        return {
            "pin": self.dotted,
            "current": self.current,
            "proposed": self.proposed,
            "reason": self.reason,
            "blocked_by": list(self.blocked_by),
            "writable": not self.blocked_by,
        }


@dataclass(frozen=True)
class CheckError:
    """A check (``source``) that could not run for a stack: ``kind`` is ``credentials``,
    ``unreachable``, ``refused`` or ``error`` (``imagectl.drift.errors``)."""

    source: str
    stack: str
    kind: str
    message: str
    cloud: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class StackDrift:
    """Everything found for one stack: findings from every source and proposed pins."""

    stack: str
    path: str
    findings: list[Finding] = field(default_factory=list)
    proposals: list[PinChange] = field(default_factory=list)
    checked: list[dict[str, object]] = field(default_factory=list)  # what upstream looked at
    written: bool = False
    errors: list[CheckError] = field(default_factory=list)  # checks that could not run

    @property
    def drifted(self) -> bool:
        return any(f.is_drift for f in self.findings)

    def check_status(self, source: str) -> dict[str, object]:
        """One source's outcome for this stack: ``error`` when it could not run (for every
        cloud or in part: its findings are still listed), else ``drift`` or ``no drift``."""
        found = [f for f in self.findings if f.source == source]
        errors = [e for e in self.errors if e.source == source]
        if errors:
            status = "error"
        elif any(f.is_drift for f in found):
            status = "drift"
        else:
            status = "no drift"
        return {"status": status, "findings": len(found), "errors": len(errors)}

    def as_dict(self, sources: tuple[str, ...] = ()) -> dict[str, object]:
        return {
            "stack": self.stack,
            "path": self.path,
            "drift": self.drifted,
            "checks": {source: self.check_status(source) for source in sources},
            "errors": [e.as_dict() for e in self.errors],
            "findings": [f.as_dict() for f in self.findings],
            "proposals": [p.as_dict() for p in self.proposals],
            "checked": self.checked,
            "written": self.written,
        }


@dataclass
class DriftReport:
    sources: tuple[str, ...]
    as_of: str
    stacks: list[StackDrift] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        return any(s.drifted for s in self.stacks)

    @property
    def complete(self) -> bool:
        """Every check ran for every stack (no ``errors``)."""
        return not any(s.errors for s in self.stacks)

    @property
    def not_run(self) -> list[str]:
        """Each (stack, source) check that could not run, in whole or for some cloud:
        ``"fleet of h100-training (aws, gcp)"``."""
        out = []
        for s in self.stacks:
            for source in self.sources:
                errors = [e for e in s.errors if e.source == source]
                if errors:
                    clouds = sorted({e.cloud for e in errors if e.cloud})
                    where = f" ({', '.join(clouds)})" if clouds else ""
                    out.append(f"{source} of {s.stack}{where}")
        return out

    @property
    def headline(self) -> str | None:
        """``"2 of 10 checks could not run: ..."`` (stacks x sources), None when all ran."""
        return could_not_run(len(self.stacks) * len(self.sources), self.not_run)

    def stack(self, name: str, path: str = "") -> StackDrift:
        for s in self.stacks:
            if s.stack == name:
                return s
        entry = StackDrift(stack=name, path=path)
        self.stacks.append(entry)
        return entry

    def as_dict(self) -> dict[str, object]:
        return {
            "drift": self.drifted,
            "complete": self.complete,
            "headline": self.headline,
            "as_of": self.as_of,
            "sources": list(self.sources),
            "stacks": [s.as_dict(self.sources) for s in self.stacks],
        }
