"""All checks, registered in the order they run (import order below).

One module per area: inventory, software conformance, memory, clocks and thermals, PCIe,
NVLink and fabric, kernel log, NVML's recovery action, image hygiene.
"""

from __future__ import annotations

from imagectl.validators.checks import (  # noqa: F401  (registration by import)
    inventory,
    software,
    memory,
    thermal,
    pcie,
    nvlink,
    kernel,
    recovery,
    hygiene,
)
from imagectl.validators.checks.base import REGISTRY, Spec


def specs_for(profile: str, *, hygiene: bool = True) -> list[Spec]:
    return [
        s
        for s in REGISTRY.values()
        if profile in s.profiles and (hygiene or not s.id.startswith("image."))
    ]


__all__ = ["REGISTRY", "Spec", "specs_for"]
