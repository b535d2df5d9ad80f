"""Every NVML call the checks make, with the argument sets a snapshot records.

This list is the contract between the checks, snapshot capture and replay: capture walks
it on a live host; replay answers exactly these calls; a test runs every check against a
recording replay backend and fails if a check makes a call missing from here.

Snapshot encoding (see ``schema/snapshot.schema.json``): a call without extra arguments
is stored under its name; a call with arguments is stored as ``{"a,b": value}`` keyed by
its arguments joined with commas. A failing call is ``{"$error": "NOT_SUPPORTED"}``
(any ``NVML_ERROR_*`` name without the prefix). A call absent from a snapshot behaves as
a function the driver lacks (``NVMLError_FunctionNotFound``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pynvml

NVLINK_MAX_LINKS = int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))

# Error counters per NVLink link (DL replay, recovery, CRC flit, CRC data, ECC data).
NVLINK_COUNTERS = {
    "replay": pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
    "recovery": pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
    "crc_flit": pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
    "crc_data": pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
    "ecc_data": getattr(pynvml, "NVML_NVLINK_ERROR_DL_ECC_DATA", 4),
}

CORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
VOLATILE = pynvml.NVML_VOLATILE_ECC
AGGREGATE = pynvml.NVML_AGGREGATE_ECC
DRAM = pynvml.NVML_MEMORY_LOCATION_DRAM
SRAM = getattr(pynvml, "NVML_MEMORY_LOCATION_SRAM", 7)

TEMP_GPU = pynvml.NVML_TEMPERATURE_GPU
THRESHOLD_SHUTDOWN = pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
THRESHOLD_SLOWDOWN = pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
THRESHOLD_GPU_MAX = pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX

RETIRE_SBE = pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
RETIRE_DBE = pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR

CLOCK_SM = pynvml.NVML_CLOCK_SM

FIELD_RECOVERY_ACTION = int(getattr(pynvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", 230))


@dataclass(frozen=True)
class Call:
    """One NVML function and the argument sets (after the handle) a snapshot records."""

    name: str
    args: tuple[tuple[int, ...], ...] = ()
    # pynvml structure returned (live returns it; replay rebuilds it from the dict)
    struct: str | None = None
    # "value": returns a value; "fill": fills a structure passed in (fabric info);
    # "fields": nvmlDeviceGetFieldValues with field ids
    kind: str = "value"
    # a versioned structure (nvml.h: ``version`` first): the pynvml constant the caller
    # must set in it (sizeof | N << 24); NVML refuses any other with
    # ARGUMENT_VERSION_MISMATCH (seen on driver 580.159.04 with the version left 0)
    version: str | None = None
    # only when the function named here is FUNCTION_NOT_FOUND (a deprecated fallback: on
    # drivers that have the newer function the old one is never called)
    fallback_for: str | None = None
    # alternative pynvml names for older/newer bindings and drivers, tried in order
    aliases: tuple[str, ...] = ()


SYSTEM_CALLS: tuple[Call, ...] = (
    Call("nvmlSystemGetDriverVersion"),
    Call("nvmlSystemGetNVMLVersion"),
    Call("nvmlSystemGetCudaDriverVersion_v2", aliases=("nvmlSystemGetCudaDriverVersion",)),
    Call("nvmlDeviceGetCount", aliases=("nvmlDeviceGetCount_v2",)),
)

_ECC_TOTALS = tuple((e, c) for e in (CORRECTED, UNCORRECTED) for c in (VOLATILE, AGGREGATE))
_ECC_LOCATIONS = tuple(
    (e, c, loc)
    for e in (CORRECTED, UNCORRECTED)
    for c in (VOLATILE, AGGREGATE)
    for loc in (DRAM, SRAM)
)

DEVICE_CALLS: tuple[Call, ...] = (
    Call("nvmlDeviceGetName"),
    Call("nvmlDeviceGetUUID"),
    Call("nvmlDeviceGetSerial"),
    Call("nvmlDeviceGetArchitecture"),
    Call("nvmlDeviceGetVbiosVersion"),
    Call("nvmlDeviceGetInforomImageVersion"),
    Call("nvmlDeviceValidateInforom"),
    Call("nvmlDeviceGetPciInfo_v3", struct="nvmlPciInfo_t", aliases=("nvmlDeviceGetPciInfo",)),
    Call("nvmlDeviceGetMemoryInfo", struct="c_nvmlMemory_t"),
    Call("nvmlDeviceGetMigMode"),
    Call("nvmlDeviceGetComputeMode"),
    Call("nvmlDeviceGetPersistenceMode"),
    Call("nvmlDeviceGetCurrentEccMode"),
    Call("nvmlDeviceGetPendingEccMode"),
    Call("nvmlDeviceGetTotalEccErrors", args=_ECC_TOTALS),
    Call("nvmlDeviceGetMemoryErrorCounter", args=_ECC_LOCATIONS),
    # SRAM error status with NVIDIA's RMA threshold flag (bThresholdExceeded), Ampere+
    Call(
        "nvmlDeviceGetSramEccErrorStatus",
        struct="c_nvmlEccSramErrorStatus_v1_t",
        kind="fill",
        version="nvmlEccSramErrorStatus_v1",
    ),
    Call("nvmlDeviceGetRemappedRows"),
    # banks by spare rows left (max, high, partial, low, none), Ampere+
    Call("nvmlDeviceGetRowRemapperHistogram", struct="c_nvmlRowRemapperHistogramValues"),
    Call("nvmlDeviceGetRetiredPages", args=((RETIRE_SBE,), (RETIRE_DBE,))),
    Call("nvmlDeviceGetRetiredPagesPendingStatus"),
    Call(
        "nvmlDeviceGetCurrentClocksEventReasons",
        aliases=("nvmlDeviceGetCurrentClocksThrottleReasons",),
    ),
    Call("nvmlDeviceGetTemperature", args=((TEMP_GPU,),)),
    Call(
        "nvmlDeviceGetTemperatureThreshold",
        args=((THRESHOLD_SHUTDOWN,), (THRESHOLD_SLOWDOWN,), (THRESHOLD_GPU_MAX,)),
    ),
    Call("nvmlDeviceGetPowerUsage"),
    Call("nvmlDeviceGetEnforcedPowerLimit"),
    Call("nvmlDeviceGetPowerManagementDefaultLimit"),
    Call("nvmlDeviceGetUtilizationRates", struct="c_nvmlUtilization_t"),
    Call("nvmlDeviceGetClockInfo", args=((CLOCK_SM,),)),
    Call("nvmlDeviceGetMaxClockInfo", args=((CLOCK_SM,),)),
    Call("nvmlDeviceGetCurrPcieLinkGeneration"),
    Call("nvmlDeviceGetCurrPcieLinkWidth"),
    Call("nvmlDeviceGetMaxPcieLinkGeneration"),
    Call("nvmlDeviceGetMaxPcieLinkWidth"),
    Call("nvmlDeviceGetGpuMaxPcieLinkGeneration"),
    Call("nvmlDeviceGetPcieReplayCounter"),
    Call("nvmlDeviceGetNvLinkState", args=tuple((link,) for link in range(NVLINK_MAX_LINKS))),
    # captured only for links whose state could be read
    Call(
        "nvmlDeviceGetNvLinkErrorCounter",
        args=tuple((link, c) for link in range(NVLINK_MAX_LINKS) for c in NVLINK_COUNTERS.values()),
    ),
    # two functions with two layouts (see fabric.py): v2 with healthMask, and the
    # deprecated v1 structure older drivers fill
    Call(
        "nvmlDeviceGetGpuFabricInfoV",
        struct="c_nvmlGpuFabricInfo_v2_t",
        kind="fill",
        version="nvmlGpuFabricInfo_v2",
    ),
    Call(
        "nvmlDeviceGetGpuFabricInfo",
        struct="c_nvmlGpuFabricInfo_t",
        kind="fill",
        fallback_for="nvmlDeviceGetGpuFabricInfoV",
    ),
    Call("nvmlDeviceGetFieldValues", args=((FIELD_RECOVERY_ACTION,),), kind="fields"),
)

BY_NAME: dict[str, Call] = {c.name: c for c in (*SYSTEM_CALLS, *DEVICE_CALLS)}


def new_struct(name: str) -> Any:
    """The structure the ``fill`` function ``name`` writes, its ``version`` set as nvml.h
    asks of the caller (every live and replayed call of it is made through this)."""
    call = BY_NAME[name]
    struct = getattr(pynvml, call.struct or "")()
    if call.version is not None:
        struct.version = getattr(pynvml, call.version)
    return struct


ALIAS_TO_NAME: dict[str, str] = {a: c.name for c in BY_NAME.values() for a in c.aliases}

# Session calls that read nothing (not recorded in a snapshot).
SESSION_CALLS = ("nvmlInit", "nvmlInitWithFlags", "nvmlShutdown", "nvmlDeviceGetHandleByIndex")


def arg_key(args: tuple[object, ...]) -> str:
    return ",".join(str(int(a)) for a in args)  # type: ignore[call-overload]
