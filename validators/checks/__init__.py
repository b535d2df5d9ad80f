"""All checks, registered in the order they run (import order below).

One module per area: inventory, software conformance, memory (and its spare rows), clocks
and thermals, PCIe, NVLink and fabric, the GPU fabric's NICs (EFA, InfiniBand, every NIC's
count, PCIe link, ACS and error counters, NCCL's network and rails, GPU-NIC topology),
kernel log, NVML's recovery action, image hygiene.
"""

from __future__ import annotations

import importlib

from imagectl.validators.registry import REGISTRY, Runs, Spec

# Run order: inventory first (nvml.init enumerates the GPUs every later check uses).
MODULES = (
    "inventory",
    "software",
    "memory",
    "spare_rows",
    "thermal",
    "pcie",
    "nvlink",
    "fabric_efa",
    "fabric_ib",
    "fabric_nic",
    "fabric_nccl",
    "topology",
    "kernel",
    "recovery",
    "hygiene",
)
for _module in MODULES:
    importlib.import_module(f"{__name__}.{_module}")


def specs_for(profile: str, *, hygiene: bool = True) -> list[Spec]:
    """The checks the runner calls for ``profile``, in run order (the other registered
    checks run in their own stage: ``validators/session.py``)."""
    return [
        s
        for s in REGISTRY.values()
        if s.runs is Runs.NVML
        and profile in s.profiles
        and (hygiene or not s.id.startswith("image."))
    ]


__all__ = ["MODULES", "REGISTRY", "Spec", "specs_for"]
