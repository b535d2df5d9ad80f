"""The GPU's NVLink fabric info, read with the structure layout its function writes.

``nvmlDeviceGetGpuFabricInfoV`` fills a versioned ``nvmlGpuFabricInfo_v2_t`` (``version``
first, then clusterUuid, status, cliqueId, state, ``healthMask``). Drivers without it
offer only the deprecated ``nvmlDeviceGetGpuFabricInfo``, which fills the v1
``nvmlGpuFabricInfo_t`` (no version, no healthMask): handing it a v2 structure would shift
every field by four bytes. Each function gets its own structure here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pynvml

from imagectl.validators.nvml.errors import error_name
from imagectl.validators.nvml.policy import nvml_policy

if TYPE_CHECKING:
    from imagectl.validators.checks.base import Finding

STATES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}


@dataclass(frozen=True)
class FabricInfo:
    state: str
    status: int
    clique_id: int
    health_mask: int | None  # None: the v1 structure has no health mask
    layout: str  # "v2" (nvmlDeviceGetGpuFabricInfoV) or "v1" (nvmlDeviceGetGpuFabricInfo)


def read_fabric(nvml: Any, handle: Any) -> FabricInfo:
    """The v2 structure through ``...InfoV``; the v1 one where the driver lacks it."""
    try:
        info = pynvml.c_nvmlGpuFabricInfo_v2_t()
        nvml.nvmlDeviceGetGpuFabricInfoV(handle, info)
        return FabricInfo(
            STATES.get(int(info.state), str(int(info.state))),
            int(info.status),
            int(info.cliqueId),
            int(info.healthMask),
            "v2",
        )
    except pynvml.NVMLError as exc:
        if error_name(exc) != "FUNCTION_NOT_FOUND":
            raise
    old = pynvml.c_nvmlGpuFabricInfo_t()
    nvml.nvmlDeviceGetGpuFabricInfo(handle, old)
    return FabricInfo(
        STATES.get(int(old.state), str(int(old.state))),
        int(old.status),
        int(old.cliqueId),
        None,
        "v1",
    )


def health_fault(info: FabricInfo) -> Finding | None:
    """A failing Finding when the v2 health mask reports a fault (``data/nvml.yaml``
    ``fabric_health``); None when it is clean, NOT_SUPPORTED, or absent (v1 structure)."""
    from imagectl.validators.checks.base import bad  # checks import this module

    if info.health_mask is None:
        return None
    policy = nvml_policy()
    mask = info.health_mask
    fields = {f.name: f.value(mask) for f in policy.fabric_fields}
    faults = [(f, f.bad[fields[f.name]]) for f in policy.fabric_fields if fields[f.name] in f.bad]
    if not faults:
        return None
    worst = max((f.action for f, _ in faults), key=lambda a: a.rank)
    return bad(
        worst,
        f"fabric state {info.state}, but its health mask reports: "
        + "; ".join(text for _, text in faults),
        measured=[f.name for f, _ in faults],
        expected="COMPLETED with a clean health mask",
        source="; ".join(f.source for f, _ in faults),
        details={"mask": hex(mask), "fields": fields, "layout": info.layout},
    )
