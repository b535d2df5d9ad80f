"""How a host check is declared: a function registered with its stable id, title and
severity (``@check``, in the one registry: ``validators/registry.py``).

A check returns one ``Finding`` (``validators/findings.py``) or a list; the runner turns
findings into ``CheckResult`` with the id, title, severity, GPU index and duration.
Per-GPU checks are called once per GPU. ``needs_nvml`` checks fail with the root cause
when NVML is not available, and are skipped on a shape without GPUs.
"""

from __future__ import annotations

from imagectl.validators.registry import (
    ALL_PROFILES,
    LOADED_PROFILES,
    REGISTRY,
    CheckFn,
    Spec,
    check,
)

__all__ = ["ALL_PROFILES", "LOADED_PROFILES", "REGISTRY", "CheckFn", "Spec", "check"]
