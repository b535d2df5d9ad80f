"""The GPU's NVLink fabric info, read with the structure layout its function writes.

``nvmlDeviceGetGpuFabricInfoV`` fills a versioned ``nvmlGpuFabricInfo_v2_t`` (``version``
first, then clusterUuid, status, cliqueId, state, ``healthMask``). Drivers without it
offer only the deprecated ``nvmlDeviceGetGpuFabricInfo``, which fills the v1
``nvmlGpuFabricInfo_t`` (no version, no healthMask): handing it a v2 structure would shift
every field by four bytes. Each function gets its own structure here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.nvml.calls import new_struct
from imagectl.validators.nvml.errors import error_name

STATES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}


@dataclass(frozen=True)
class FabricInfo:
    state: str
    status: int
    clique_id: int
    health_mask: int | None  # None: the v1 structure has no health mask
    layout: str  # "v2" (nvmlDeviceGetGpuFabricInfoV) or "v1" (nvmlDeviceGetGpuFabricInfo)


def read_fabric(nvml: NvmlBackend, handle: object) -> FabricInfo:
    """The v2 structure through ``...InfoV``; the v1 one where the driver lacks it."""
    try:
        info = new_struct("nvmlDeviceGetGpuFabricInfoV")  # its version set, as nvml.h asks
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
