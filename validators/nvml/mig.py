"""Is a GPU in MIG mode, and what does that mean for its NVLinks and its fabric state?

With MIG enabled the driver enables no NVLink (on HGX A100 the Fabric Manager User Guide
says the links are trained off), so every NVLink and fabric check asks ``links_off_by_mig``
before it calls an inactive link or a missing fabric registration a fault. The mode itself
against the expectations is ``gpu.mig_mode``'s to judge. Rules: ``data/nvml.yaml``
``mig_nvlink``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.nvml.errors import error_name
from imagectl.validators.nvml.policy import nvml_policy

_NO_MIG = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND")


@dataclass(frozen=True)
class MigLinks:
    """A GPU whose NVLinks are off because MIG is enabled on it."""

    arch: int | None
    source: str

    def note(self) -> str:
        return "MIG is enabled on this GPU: the driver enables no NVLink with MIG"


def mig_enabled(nvml: NvmlBackend, handle: object) -> bool:
    """The GPU's current MIG mode (a GPU without MIG, NOT_SUPPORTED: disabled)."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError as exc:
        if error_name(exc) in _NO_MIG:
            return False
        raise
    return bool(current)


def _arch(nvml: NvmlBackend, handle: object) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetArchitecture(handle))
    except pynvml.NVMLError:
        return None


def links_off_by_mig(nvml: NvmlBackend, handle: object) -> MigLinks | None:
    """The reason this GPU's NVLinks are expected off (MIG enabled on an architecture where
    that turns them off), or None: its links are judged as usual."""
    if not mig_enabled(nvml, handle):
        return None
    arch = _arch(nvml, handle)
    rule = nvml_policy().mig_links(arch)
    return MigLinks(arch, rule.source) if rule.links_off else None
