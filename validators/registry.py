"""The one registry of checks: every check id a receipt can hold is declared here once,
with its title, severity, the recovery action its failure recommends and how it runs.

Two ways in, one registry:

- ``@check(id, title, ...)`` on a function the runner calls (``validators/runner.py``:
  on the host, once per host or per GPU, under a deadline): the NVML, host and fabric
  checks in ``validators/checks/``;
- ``declare(id, title, runs=...)`` for a check whose work runs elsewhere and is judged by
  its own module: the CUDA smoke tests (torch, imported only when they run), cuInit in
  fresh processes, DCGM's diagnostics, the collectives across ranks, and the session's own
  verdicts (a stage's deadline, coverage, the baseline). ``family(prefix, ...)`` declares
  an open set of ids (one per test ``dcgmi`` reports, one per compared check).

Every ``CheckResult`` is made by ``check_result()`` or ``Spec.result()``, which take the title
from the registry and refuse an id nobody declared (``tests/validators/
test_check_registry.py`` holds that no other code constructs one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from imagectl.validators.findings import Finding
from imagectl.validators.results import Action, CheckResult, Severity

ALL_PROFILES = frozenset({"boot", "quick", "full", "burn"})
LOADED_PROFILES = frozenset({"quick", "full", "burn"})

CheckFn = Callable[..., "Finding | list[Finding]"]


class Runs(str, Enum):
    """Where a check's work runs."""

    NVML = "nvml"  # the runner calls its function on the host (NVML, host facts, fabric)
    TORCH = "torch"  # the CUDA smoke tests and the load they sample (compute/)
    SUBPROCESS = "subprocess"  # fresh processes: cuInit tries, the toolkit's facts
    DCGM = "dcgm"  # NVIDIA's dcgmi diag, live or recorded (dcgm/)
    RANKS = "ranks"  # collectives across ranks and nodes (collectives/, the fabric run)
    SESSION = "session"  # the run's own verdicts: a stage's deadline, coverage, baseline


class UnregisteredCheck(LookupError):
    """A result for a check id nobody declared (a bug in the validator, never input)."""


class Check(Protocol):
    """What every registered check is: its stable id, title, severity, the action its
    failure recommends, where it runs, and the one way to make its result."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def severity(self) -> Severity: ...

    @property
    def runs(self) -> Runs: ...

    @property
    def failure_action(self) -> Action: ...

    def result(self, **fields: object) -> CheckResult: ...


@dataclass(frozen=True)
class Spec:
    id: str
    title: str
    severity: Severity
    fn: CheckFn | None
    per_gpu: bool
    needs_nvml: bool
    profiles: frozenset[str]
    timeout_s: float
    timeout_action: Action
    candidate_only: bool = False
    runs: Runs = Runs.NVML
    # the action a failure recommends; None: each finding carries its own (NVML checks)
    action: Action | None = None
    # an open family of ids (``id`` is the prefix, ending in "."): what lists its members
    members: Callable[[], Iterable[tuple[str, str]]] | None = None

    @property
    def is_family(self) -> bool:
        return self.id.endswith(".")

    @property
    def failure_action(self) -> Action:
        """The docs' action column: the declared one, else the action on a timeout."""
        return self.action if self.action is not None else self.timeout_action

    def result(self, **fields: object) -> CheckResult:
        """This check's ``CheckResult``; ``title`` only for a member of a family."""
        title = fields.pop("title", None)
        check_id = fields.pop("id", self.id)
        if self.is_family:
            if not str(check_id).startswith(self.id) or check_id == self.id:
                raise UnregisteredCheck(f"{check_id!r} is not a member of {self.id}*")
        elif check_id != self.id:
            raise UnregisteredCheck(f"{check_id!r} is not {self.id!r}")
        elif title is not None and title != self.title:
            raise UnregisteredCheck(f"{check_id}: its title is the registry's, not {title!r}")
        fields.setdefault("severity", self.severity)
        return CheckResult(id=check_id, title=title or self.title, **fields)


REGISTRY: dict[str, Spec] = {}


def _register(spec: Spec) -> Spec:
    if spec.id in REGISTRY:
        raise RuntimeError(f"check id {spec.id} registered twice")
    REGISTRY[spec.id] = spec
    return spec


def check(
    id: str,
    title: str,
    *,
    severity: Severity = Severity.CRITICAL,
    per_gpu: bool = False,
    needs_nvml: bool = True,
    profiles: frozenset[str] = ALL_PROFILES,
    timeout_s: float = 10.0,
    timeout_action: Action = Action.REBOOT,
    candidate_only: bool = False,
) -> Callable[[CheckFn], CheckFn]:
    """Register a function the runner calls (``Runs.NVML``)."""

    def register(fn: CheckFn) -> CheckFn:
        _register(
            Spec(
                id,
                title,
                severity,
                fn,
                per_gpu,
                needs_nvml,
                profiles,
                timeout_s,
                timeout_action,
                candidate_only,
            )
        )
        return fn

    return register


def declare(
    id: str,
    title: str,
    *,
    runs: Runs,
    action: Action,
    severity: Severity = Severity.CRITICAL,
    profiles: frozenset[str] = LOADED_PROFILES,
    per_gpu: bool = False,
    members: Callable[[], Iterable[tuple[str, str]]] | None = None,
) -> Spec:
    """Register a check judged by its own module (``runs`` says where its work runs)."""
    if runs is Runs.NVML:
        raise ValueError(f"{id}: a check the runner calls is declared with @check")
    return _register(
        Spec(
            id,
            title,
            severity,
            None,
            per_gpu,
            needs_nvml=False,
            profiles=profiles,
            timeout_s=0.0,
            timeout_action=action,
            runs=runs,
            action=action,
            members=members,
        )
    )


def family(
    prefix: str,
    title: str,
    *,
    runs: Runs,
    action: Action,
    members: Callable[[], Iterable[tuple[str, str]]],
    severity: Severity = Severity.CRITICAL,
    profiles: frozenset[str] = LOADED_PROFILES,
) -> Spec:
    """Register an open set of ids under ``prefix`` (ending in "."); ``members`` lists the
    known ones with their titles (the docs' table and the registry test read it)."""
    if not prefix.endswith("."):
        raise ValueError(f"a family's prefix ends in '.': {prefix!r}")
    return declare(
        prefix, title, runs=runs, action=action, severity=severity, profiles=profiles,
        members=members,
    )  # fmt: skip


def spec_of(check_id: str) -> Spec:
    """The registered check of ``check_id``: its own entry, or the family it belongs to."""
    spec = REGISTRY.get(check_id)
    if spec is not None and not spec.is_family:
        return spec
    families = [s for s in REGISTRY.values() if s.is_family and check_id.startswith(s.id)]
    if families and check_id not in REGISTRY:
        return max(families, key=lambda s: len(s.id))
    raise UnregisteredCheck(
        f"check id {check_id!r} is not registered (declare it with @check or declare() "
        "in imagectl.validators.registry)"
    )


def check_result(**fields: object) -> CheckResult:
    """The ``CheckResult`` of the registered check named by ``id=`` (its title from the
    registry; a family's member may name its own)."""
    check_id = fields.get("id")
    if not isinstance(check_id, str):
        raise UnregisteredCheck(f"a check result needs its id, not {check_id!r}")
    return spec_of(check_id).result(**fields)
