"""Fault classes 5-8: what NVML's own answers say about one GPU.

5. NVML errors: NOT_SUPPORTED on a call the architecture has or a peer of the same model
   answers, UNKNOWN/TIMEOUT/IRQ_ISSUE with their recovery actions, one GPU whose handle
   fails (the others still judged).
6. Consistency against the SKU and across GPUs: NVML memory total, VBIOS, power limit,
   the current PCIe link width at boot.
7. NVLink, as DCGM's health watch judges it: replay/recovery errors, CRC rate per second,
   SLEEP and ACTIVE_TRAFFIC_DISABLED link states.
8. The fabric health mask (nvmlGpuFabricInfo_v2_t.healthMask) and the v1 structure.

Each fault cites the rule it follows; validators/data/nvml.yaml and thresholds.yaml
carry the same sources.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from snaplib import (
    NVLINK_COUNTERS,
    Fault,
    Snap,
    U,
    V,
    _gpus,
    both,
    drop_calls,
    fabric_mask,
    gpu_set,
)

REPLAY = NVLINK_COUNTERS["replay"]
RECOVERY = NVLINK_COUNTERS["recovery"]
CRC_FLIT = NVLINK_COUNTERS["crc_flit"]
CRC_DATA = NVLINK_COUNTERS["crc_data"]

NVML_RETURN = "NVML API reference, nvmlReturn_t"
DCGM_NVLINK = (
    "NVIDIA DCGM health watch (DcgmHealthWatch MonitorNVLink; dcgm_gpu_hardware_limits.h "
    "DCGM_LIMIT_MAX_NVLINK_ERROR 1, DCGM_LIMIT_MAX_NVLINK_CRC_ERROR 100 per second)"
)
FABRIC_MASK = "nvml.h NVML_GPU_FABRIC_HEALTH_MASK_* of nvmlGpuFabricInfo_v2_t.healthMask"


def all_keys(func: str, value: Any, gpu: int) -> Callable[[Snap], None]:
    """Every argument set of ``func`` on one GPU answers ``value`` (e.g. an error)."""

    def apply(s: Snap) -> None:
        dev = _gpus(s)[gpu]
        dev[func] = {k: dict(value) if isinstance(value, dict) else value for k in dev[func]}

    return apply


def lose_gpu(index: int, error: str) -> Callable[[Snap], None]:
    """nvmlDeviceGetHandleByIndex(index) fails: capture records the device as an error."""

    def apply(s: Snap) -> None:
        _gpus(s)[index] = {"$error": error}

    return apply


def mem_total(mib: int, gpu: int) -> Callable[[Snap], None]:
    return gpu_set(
        "nvmlDeviceGetMemoryInfo",
        {"total": mib * 2**20, "free": (mib - 500) * 2**20, "used": 500 * 2**20},
        gpu=gpu,
    )


def fabric(gpu: int, **fields: int) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        _gpus(s)[gpu]["nvmlDeviceGetGpuFabricInfoV"]["healthMask"] = fabric_mask(**fields)

    return apply


def link_states(value: int, links: range, gpu: int | None) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        for i, dev in enumerate(_gpus(s)):
            if gpu is None or i == gpu:
                for link in links:
                    dev["nvmlDeviceGetNvLinkState"][str(link)] = value

    return apply


FAULTS: dict[str, Fault] = {
    # -- 5. NVML errors -------------------------------------------------------------------
    "nvml-ecc-totals-not-supported-peers-answer": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetTotalEccErrors", {"$error": "NOT_SUPPORTED"}, gpu=5, key=f"{U},{V}"),
        {"gpu.ecc.volatile_uncorrected": "RESET_GPU"},
        source=(
            f"{NVML_RETURN}: NOT_SUPPORTED means the device lacks the feature; its seven "
            "peers of the same model answer nvmlDeviceGetTotalEccErrors, so GPU 5 is degraded"
        ),
    ),
    "nvml-temperature-not-supported": Fault(
        ("l4-1x", "h200-8x"),
        gpu_set("nvmlDeviceGetTemperature", {"$error": "NOT_SUPPORTED"}, gpu=0, key="0"),
        {"gpu.temperature": "RESET_GPU"},
        source=(
            "NVML API reference, nvmlDeviceGetTemperature: 'For all products': NOT_SUPPORTED "
            "from it is a degraded GPU, peer or no peer"
        ),
    ),
    "nvml-ecc-counters-not-supported-peers-answer": Fault(
        ("a100-sxm-80gb-8x",),
        all_keys("nvmlDeviceGetMemoryErrorCounter", {"$error": "NOT_SUPPORTED"}, gpu=2),
        {"gpu.ecc.sram": "RESET_GPU", "gpu.ecc.dram": "RESET_GPU"},
        source=(
            f"{NVML_RETURN}: the other A100s answer nvmlDeviceGetMemoryErrorCounter; a "
            "counter that cannot be read is never 'zero, pass'"
        ),
    ),
    "nvml-remapped-rows-not-supported-on-ada": Fault(
        ("l4-1x",),
        gpu_set("nvmlDeviceGetRemappedRows", {"$error": "NOT_SUPPORTED"}, gpu=0),
        {
            "gpu.row_remap.pending": "RESET_GPU",
            "gpu.row_remap.failure": "RESET_GPU",
            "gpu.row_remap.uncorrectable": "RESET_GPU",
        },
        source=(
            "NVML API reference, nvmlDeviceGetRemappedRows: 'For Ampere or newer fully "
            "supported devices'; an Ada L4 must answer it (no peer needed)"
        ),
    ),
    "nvml-unknown-error": Fault(
        ("h200-8x",),
        gpu_set("nvmlDeviceGetTotalEccErrors", {"$error": "UNKNOWN"}, gpu=4, key=f"{U},{V}"),
        {"gpu.ecc.volatile_uncorrected": "RESET_GPU"},
        source=f"{NVML_RETURN}: NVML_ERROR_UNKNOWN = an internal driver error: reset the GPU",
    ),
    "nvml-irq-issue": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        gpu_set("nvmlDeviceGetTemperature", {"$error": "IRQ_ISSUE"}, gpu=6, key="0"),
        {"gpu.temperature": "REBOOT"},
        source=f"{NVML_RETURN}: NVML_ERROR_IRQ_ISSUE = the kernel driver saw an interrupt issue",
    ),
    "nvml-timeout": Fault(
        ("a100-sxm-80gb-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", {"$error": "TIMEOUT"}, gpu=1),
        {"gpu.clocks.events": "RESET_GPU"},
        source=f"{NVML_RETURN}: NVML_ERROR_TIMEOUT = the GPU did not answer in time",
    ),
    "gpu-handle-lost": Fault(
        ("h100-sxm-8x", "h200-8x"),
        lose_gpu(3, "GPU_IS_LOST"),
        {"nvml.init": "REBOOT"},
        source=(
            f"{NVML_RETURN}: NVML_ERROR_GPU_IS_LOST from nvmlDeviceGetHandleByIndex fails that "
            "GPU (Xid Catalog Xid 79: restart); the other seven are judged and pass"
        ),
    ),
    # -- 6. consistency against the SKU and across GPUs -------------------------------------
    "memory-short-4gib": Fault(
        ("h100-sxm-8x",),
        mem_total(81559 - 4096, gpu=5),
        {"gpu.memory": "ISOLATE_RMA"},
        source=(
            "images/compat/gpus.yaml H100-SXM-80GB nvml_memory_mib 81559 "
            "(modal-labs/modal-client PR 2797); 4 GiB short is memory missing"
        ),
    ),
    "memory-short-2gib": Fault(
        ("a100-sxm-80gb-8x",),
        mem_total(81920 - 2048, gpu=0),
        {"gpu.memory": "ISOLATE_RMA"},
        source=(
            "images/compat/gpus.yaml A100-SXM-80GB nvml_memory_mib 81920 "
            "(modal-labs/modal-client PR 2797)"
        ),
    ),
    "memory-short-1gib": Fault(
        ("l4-1x",),
        mem_total(23034 - 1024, gpu=0),
        {"gpu.memory": "ISOLATE_RMA"},
        source=(
            "images/compat/gpus.yaml L4 nvml_memory_mib 23034 (modal-labs/modal-client PR 2797)"
        ),
    ),
    "vbios-mismatch": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetVbiosVersion", "96.00.74.00.0B", gpu=2),
        {"gpu.inforom": "DRAIN"},
        source="NVIDIA HGX firmware: one firmware bundle for every GPU of a baseboard (nvfwupd)",
    ),
    "vbios-mismatch-h200": Fault(
        ("h200-8x",),
        gpu_set("nvmlDeviceGetVbiosVersion", "96.00.9F.00.04", gpu=7),
        {"gpu.inforom": "DRAIN"},
        source="NVIDIA HGX firmware: one firmware bundle for every GPU of a baseboard (nvfwupd)",
    ),
    "power-capped-a100": Fault(
        ("a100-sxm-80gb-8x",),
        gpu_set("nvmlDeviceGetEnforcedPowerLimit", 350_000, gpu=4),
        {"gpu.power.limit": "REBOOT"},
        source=(
            "images/catalog/shapes.yaml p4de power limit 400 W; NVML "
            "nvmlDeviceGetEnforcedPowerLimit"
        ),
    ),
    "power-capped-h200": Fault(
        ("h200-8x",),
        gpu_set("nvmlDeviceGetEnforcedPowerLimit", 600_000, gpu=1),
        {"gpu.power.limit": "REBOOT"},
        source=(
            "images/catalog/shapes.yaml p5e power limit 700 W; NVML nvmlDeviceGetEnforcedPowerLimit"
        ),
    ),
    "pcie-width-x8-at-boot": Fault(
        ("h100-sxm-8x", "l4-1x"),
        gpu_set("nvmlDeviceGetCurrPcieLinkWidth", 8, gpu=0),
        {"gpu.pcie.link_max": "DRAIN"},
        source=(
            "PCIe Base Specification: power management lowers the link speed, never the "
            "negotiated width; NVML nvmlDeviceGetCurrPcieLinkWidth x8 of x16 at idle is a fault"
        ),
    ),
    # -- 7. NVLink ------------------------------------------------------------------------
    "nvlink-replay-error": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetNvLinkErrorCounter", 1, gpu=3, key=f"7,{REPLAY}"),
        {"gpu.nvlink.errors": "RESET_GPU"},
        source=f"{DCGM_NVLINK}: one replay error is DCGM_FR_NVLINK_ERROR_CRITICAL",
    ),
    "nvlink-recovery-error": Fault(
        ("a100-sxm-80gb-8x",),
        gpu_set("nvmlDeviceGetNvLinkErrorCounter", 2, gpu=6, key=f"2,{RECOVERY}"),
        {"gpu.nvlink.errors": "RESET_GPU"},
        source=f"{DCGM_NVLINK}: recovery errors are DCGM_FR_NVLINK_ERROR_CRITICAL",
    ),
    "nvlink-crc-high-rate-a100": Fault(
        ("a100-sxm-80gb-8x",),
        # 60,000 CRC data errors on link 9 in the 300 s since boot: 200 per second
        gpu_set("nvmlDeviceGetNvLinkErrorCounter", 60_000, gpu=7, key=f"9,{CRC_DATA}"),
        {"gpu.nvlink.errors": "RESET_GPU"},
        source=f"{DCGM_NVLINK}: CRC at or above 100/s is DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD",
    ),
    # ignorable (warn, pass): a lifetime CRC count at a low rate
    "nvlink-crc-low-rate": Fault(
        ("h200-8x", "h100-sxm-8x"),
        # 150 CRC flit errors in 300 s: 0.5 per second
        gpu_set("nvmlDeviceGetNvLinkErrorCounter", 150, gpu=0, key=f"1,{CRC_FLIT}"),
        {},
        source=f"{DCGM_NVLINK}: CRC under 100/s is DCGM_FR_NVLINK_ERROR_THRESHOLD (a warning)",
        expect_warn=("gpu.nvlink.errors",),
    ),
    "nvlink-sleep": Fault(
        ("h100-sxm-8x", "h200-8x"),
        link_states(2, range(0, 18, 2), gpu=None),
        {},
        source=(
            "NVML nvmlNvLinkState_t: NVML_NVLINK_STATE_SLEEP (2) is a link in its low-power "
            "state, healthy"
        ),
    ),
    "nvlink-traffic-disabled": Fault(
        ("h200-8x",),
        link_states(3, range(3, 4), gpu=5),
        {"gpu.nvlink.active": "RESET_GPU"},
        source=(
            "NVML nvmlNvLinkState_t: NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED carries no traffic"
        ),
    ),
    # -- 8. fabric -------------------------------------------------------------------------
    "fabric-degraded-bandwidth": Fault(
        ("h100-sxm-8x",),
        fabric(2, DEGRADED_BW=1),
        {"gpu.fabric.state": "DRAIN"},
        source=f"{FABRIC_MASK}: DEGRADED_BW_TRUE",
    ),
    "fabric-route-unhealthy": Fault(
        ("h200-8x",),
        fabric(6, ROUTE_UNHEALTHY=1),
        {"gpu.fabric.state": "REBOOT"},
        source=f"{FABRIC_MASK}: ROUTE_UNHEALTHY_TRUE",
    ),
    "fabric-insufficient-nvlinks": Fault(
        ("h100-sxm-8x",),
        fabric(0, INCORRECT_CONFIGURATION=5),
        {"gpu.fabric.state": "DRAIN"},
        source=f"{FABRIC_MASK}: INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS",
    ),
    "fabric-access-timeout-recovery": Fault(
        ("h200-8x",),
        fabric(1, ACCESS_TIMEOUT_RECOVERY=1),
        {"gpu.fabric.state": "REBOOT"},
        source=f"{FABRIC_MASK}: ACCESS_TIMEOUT_RECOVERY_TRUE",
    ),
    "fabric-v1-in-progress": Fault(
        ("h100-sxm-8x",),
        both(
            drop_calls("nvmlDeviceGetGpuFabricInfoV"),
            gpu_set(
                "nvmlDeviceGetGpuFabricInfo",
                {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 0, "state": 2},
                gpu=4,
            ),
        ),
        {"gpu.fabric.state": "REBOOT"},
        source=(
            "NVML: an older driver offers only nvmlDeviceGetGpuFabricInfo with the v1 "
            "nvmlGpuFabricInfo_t (no version, no healthMask); its state IN_PROGRESS is read "
            "at the v1 offsets"
        ),
    ),
}
