"""How a check is declared: a function registered with its stable id, title and severity.

A check returns one ``Finding`` (``validators/findings.py``) or a list; the runner turns
findings into ``CheckResult`` with the id, title, severity, GPU index and duration.
Per-GPU checks are called once per GPU. ``needs_nvml`` checks fail with the root cause
when NVML is not available, and are skipped on a shape without GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from imagectl.validators.findings import Finding
from imagectl.validators.results import Action, Severity

ALL_PROFILES = frozenset({"boot", "quick", "full", "burn"})
LOADED_PROFILES = frozenset({"quick", "full", "burn"})


CheckFn = Callable[..., "Finding | list[Finding]"]


@dataclass(frozen=True)
class Spec:
    id: str
    title: str
    severity: Severity
    fn: CheckFn
    per_gpu: bool
    needs_nvml: bool
    profiles: frozenset[str]
    timeout_s: float
    timeout_action: Action
    candidate_only: bool = False


REGISTRY: dict[str, Spec] = {}


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
    def register(fn: CheckFn) -> CheckFn:
        if id in REGISTRY:
            raise RuntimeError(f"check id {id} registered twice")
        REGISTRY[id] = Spec(
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
        return fn

    return register
