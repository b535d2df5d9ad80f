"""Fault classes of NVSwitch, NVLink, MIG and the fabric manager: the verdict each document
gives, written from the document before the validator was asked.

1. NVSwitch SXids: the line's own severity word decides (the driver prints "Fatal, Link ..",
   "Non-fatal, Link ..", "Correctable, Link .." and a "Severity <0|1>" line per error);
   the Fabric Manager User Guide decides the action: fatal -> reset the GPUs and NVSwitches
   of the baseboard (RESET_GPU; reboot if it persists), non-fatal -> informational (a
   warning at most), correctable -> informational.
2. Actions that need hands: the Xid Catalog's CHECK_MECHANICALS bucket (Xid 54, auxiliary
   power not connected) and NVML's INSUFFICIENT_POWER (power cables not attached) drain the
   host for hands-on work; a reboot cannot plug a cable in.
3. MIG: with MIG enabled the driver enables no NVLink (on HGX A100 the Fabric Manager User
   Guide says the links are trained off), so an inactive link or a GPU outside the NVLink
   fabric is what a MIG GPU shows, not a link fault; gpu.mig_mode judges the mode itself.
6. NVML recovery actions 5-7 (RECOVER_IMEX_DOMAIN, BUS_RESET, SYSTEM_REBOOT) and a value
   newer than them.
7. A kernel log that cannot be read fails: the boot's XIDs and SXids are unknown.
"""

from __future__ import annotations

from collections.abc import Callable

from snaplib import (
    FIELD_RECOVERY_ACTION,
    Fault,
    Snap,
    _gpus,
    both,
    gpu_set,
    log_line,
    xid_lines,
)

CAT = "NVIDIA Xid Catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"
FM = "NVIDIA Fabric Manager User Guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide)"
SXID_DRIVER = (
    "NVIDIA/open-gpu-kernel-modules 595.45.04 src/common/nvswitch/kernel/inc/intr_nvswitch.h "
    "(NVSWITCH_REPORT_FATAL prints 'Fatal, Link %02d', NVSWITCH_REPORT_NONFATAL 'Non-fatal', "
    "NVSWITCH_REPORT_CORRECTABLE 'Correctable'); codes: src/common/nvswitch/interface/"
    "ctrl_dev_nvswitch.h NVSWITCH_ERR_HW_*"
)
MIG_DRIVER = (
    "NVIDIA/open-gpu-kernel-modules 595.45.04 src/nvidia/src/kernel/gpu/nvlink/"
    "kernel_nvlinkstate.c ('NvLink is not supported with MIG': enabledLinks cleared) and "
    "mig_mgr/kernel_mig_manager.c kmigmgrIsMIGNvlinkP2PSupported (false once MIG is enabled)"
)
RECOVERY = (
    "NVML nvml.h nvmlDeviceGpuRecoveryAction_t (nvidia-ml-py 13.615.71 pynvml; cuda.bindings."
    "nvml.DeviceGpuRecoveryAction): 5 RECOVER_IMEX_DOMAIN 'Recover IMEX Domain', 6 BUS_RESET "
    "'Reset the GPU's PCIe bus', 7 SYSTEM_REBOOT 'Reboot the system'"
)

# NVSwitch PCI addresses on an HGX baseboard (the GPUs' are in snaplib.BASES)
SWITCH = "0000:07:00.0"


def sxid(code: int, text: str, switch: int = 2, bus: str = SWITCH) -> Callable[[Snap], None]:
    """One ``nvidia-nvswitchN: SXid (PCI:...): NNNNN, <text>`` line (NVSWITCH_PRINT_SXID)."""
    return log_line(f"nvidia-nvswitch{switch}: SXid (PCI:{bus}): {code:05d}, {text}")


def sxid_dump(code: int, severity: int, instance: int, switch: int = 2) -> Callable[[Snap], None]:
    """The two lines error_nvswitch.c _nvswitch_dump_error_entry prints for a logged error
    (severity: NVSWITCH_ERROR_SEVERITY_NONFATAL 0, _FATAL 1)."""
    return both(
        sxid(
            code,
            f"Severity {severity} Engine instance {instance:02d} Sub-engine instance 00",
            switch,
        ),
        sxid(code, "Data {" + ", ".join(["0x00000000"] * 9) + "}", switch),
    )


def set_links(value: int, gpu: int) -> Callable[[Snap], None]:
    """Every NVLink the GPU has reports ``value`` (nvmlNvLinkState_t: 0 INACTIVE)."""

    def apply(s: Snap) -> None:
        states = _gpus(s)[gpu]["nvmlDeviceGetNvLinkState"]
        for link, state in states.items():
            if not isinstance(state, dict):  # links past the GPU's count stay INVALID_ARGUMENT
                states[link] = value

    return apply


def mig_on(gpu: int, fabric_state: int | None = None) -> Callable[[Snap], None]:
    """GPU ``gpu`` in MIG mode: its NVLinks off, and (Hopper) outside the NVLink fabric."""
    parts = [gpu_set("nvmlDeviceGetMigMode", [1, 1], gpu=gpu), set_links(0, gpu)]
    if fabric_state is not None:
        fabric = {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 0, "state": fabric_state}
        parts += [
            gpu_set("nvmlDeviceGetGpuFabricInfo", fabric, gpu=gpu),
            gpu_set("nvmlDeviceGetGpuFabricInfoV", {**fabric, "healthMask": 0}, gpu=gpu),
        ]
    return both(*parts)


def mig_on_all(count: int, fabric_state: int | None = None) -> Callable[[Snap], None]:
    return both(*(mig_on(i, fabric_state) for i in range(count)))


def lose_gpu(index: int, error: str) -> Callable[[Snap], None]:
    """nvmlDeviceGetHandleByIndex(index) fails: capture records the device as an error."""

    def apply(s: Snap) -> None:
        _gpus(s)[index] = {"$error": error}

    return apply


def kernel_log_unreadable(error: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        s["kernel_log"] = {"source": "none", "error": error, "filtered": True, "text": ""}

    return apply


def recovery(value: int, gpu: int) -> Callable[[Snap], None]:
    return gpu_set("nvmlDeviceGetFieldValues", value, gpu=gpu, key=str(FIELD_RECOVERY_ACTION))


UNREADABLE = (
    "journalctl: Failed to open journal: Permission denied; dmesg: dmesg: read kernel buffer "
    "failed: Operation not permitted"
)

FAULTS: dict[str, Fault] = {
    # -- 1. NVSwitch SXids -------------------------------------------------------------------
    "sxid-fatal-resets-baseboard": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            sxid(12028, "Fatal, Link 32 egress non-posted PRIV error (First)"),
            sxid_dump(12028, 1, 32),
        ),
        {"kernel.sxid": "RESET_GPU"},
        source=(
            f"{FM}, NVSwitch SXid errors: a fatal SXid needs the GPUs and NVSwitches of the "
            f"baseboard reset (then a reboot if it persists): RESET_GPU; {SXID_DRIVER}: 12028 "
            "NVSWITCH_ERR_HW_NPORT_EGRESS_PRIVRSPERR"
        ),
    ),
    "sxid-fatal-after-nonfatal": Fault(
        ("h100-sxm-8x", "h200-8x"),
        both(
            sxid(20034, "Non-fatal, Link 12 LTSSM Fault Up", switch=0),
            sxid(20034, "Fatal, Link 12 LTSSM Fault Up", switch=0),
        ),
        {"kernel.sxid": "RESET_GPU"},
        source=(
            f"{SXID_DRIVER}: NVSWITCH_REPORT_CONTAIN reports one code Fatal or Non-fatal by "
            f"containment, so one code can be both; the fatal line decides ({FM}: reset the "
            "baseboard's GPUs and NVSwitches); 20034 NVSWITCH_ERR_HW_DLPL_LTSSM_FAULT_UP"
        ),
    ),
    "sxid-nonfatal-informational": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        both(
            sxid(22013, "Non-fatal, Link 28 MINION nonfatal interrupt (First)", switch=4),
            sxid_dump(22013, 0, 28, switch=4),
        ),
        {},
        source=(
            f"{FM}, Non-fatal NVSwitch SXid errors: informational, Fabric Manager neither "
            "terminates nor blocks CUDA jobs (a warning, never a failure); "
            f"{SXID_DRIVER}: 22013 NVSWITCH_ERR_HW_MINION_NONFATAL"
        ),
        expect_warn=("kernel.sxid",),
    ),
    "sxid-correctable": Fault(
        ("h200-8x",),
        sxid(24001, "Correctable, Link 05 TCEN0 crumbstore ECC limit error (First)", switch=1),
        {},
        source=(
            f"{SXID_DRIVER}: NVSWITCH_REPORT_CORRECTABLE logs a corrected error "
            "('Correctable, Link ..'), recorded as non-fatal; "
            f"{FM}: non-fatal SXids are informational; 24001 NVSWITCH_ERR_HW_NPORT_SOURCETRACK_"
            "CREQ_TCEN0_CRUMBSTORE_ECC_LIMIT_ERR"
        ),
    ),
    # -- 2. actions that need hands -------------------------------------------------------------
    "xid54-aux-power-not-connected": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        xid_lines(
            54,
            "Auxiliary power is not connected to the GPU board",
            gpu=4,
            pids=(0,),
            name="<unknown>",
        ),
        {"kernel.xid": "DRAIN"},
        source=(
            f"{CAT}: Xid 54 SILENT_RUNNING_PWR_REDUCED_CLOCKING 'Auxiliary power is not "
            "connected to the GPU board', immediate action CHECK_MECHANICALS: hands on the "
            "machine (DRAIN); a reboot cannot connect a power cable"
        ),
    ),
    "gpu-handle-insufficient-power": Fault(
        ("h200-8x",),
        lose_gpu(6, "INSUFFICIENT_POWER"),
        {"nvml.init": "DRAIN"},
        source=(
            "NVML API reference, nvmlDeviceGetHandleByIndex: NVML_ERROR_INSUFFICIENT_POWER 'if "
            "any attached devices have improperly attached external power cables': hands-on "
            "work (DRAIN), not a reboot"
        ),
    ),
    "xid54-earlier-boot-only": Fault(
        ("h100-sxm-8x",),
        both(
            log_line("-- Boot 0a0b0c0d11112222333344445555666 --", stamp=""),
            xid_lines(
                54,
                "Auxiliary power is not connected to the GPU board",
                gpu=2,
                stamp="2026-11-19T22:10:00+0000",
            ),
            log_line("-- Boot 9f1c1111222233334444555566667777 --", stamp=""),
            log_line("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05"),
        ),
        {},
        source=(
            f"{CAT}: Xid 54 (CHECK_MECHANICALS) was logged in the previous boot only: the cable "
            "was seated before this boot and this boot is clean"
        ),
    ),
    # -- 3. MIG and NVLink ----------------------------------------------------------------
    "mig-on-a100-links-trained-off": Fault(
        ("a100-sxm-80gb-8x",),
        mig_on(2),
        {"gpu.mig_mode": "RESET_GPU"},
        source=(
            f"{FM}, Interoperability With MIG: on HGX A100 the GPU's NVLinks are trained off "
            "when MIG is enabled, so GPU 2's inactive links are MIG's, not a link fault; the "
            "stack expects MIG off (gpu.mig_mode: nvidia-smi -mig 0 and a GPU reset)"
        ),
    ),
    "mig-on-hopper-outside-fabric": Fault(
        ("h100-sxm-8x", "h200-8x"),
        mig_on(5, fabric_state=1),
        {"gpu.mig_mode": "RESET_GPU"},
        source=(
            f"{MIG_DRIVER}: a GPU in MIG mode enables no NVLink on any architecture, so its "
            "links are inactive and it takes no part in the NVLink fabric (state NOT_STARTED); "
            "only the MIG mode itself is wrong for this stack (gpu.mig_mode)"
        ),
    ),
    "mig-on-one-gpu-link-down-on-another": Fault(
        ("h100-sxm-8x",),
        both(mig_on(0, fabric_state=1), gpu_set("nvmlDeviceGetNvLinkState", 0, gpu=3, key="7")),
        {"gpu.mig_mode": "RESET_GPU", "gpu.nvlink.active": "RESET_GPU"},
        source=(
            f"{MIG_DRIVER}: MIG explains GPU 0's links only; GPU 3 is not in MIG mode and its "
            "link 7 INACTIVE is a link fault (nvml.h nvmlNvLinkState_t; NVLink workflow: reset)"
        ),
    ),
    "mig-expected-a100-links-off": Fault(
        ("a100-sxm-80gb-8x",),
        mig_on_all(8),
        {},
        source=(
            f"{FM}, Interoperability With MIG: on HGX A100 the NVLinks are trained off when MIG "
            "is enabled; the expectations ask for MIG, so every GPU's links off is healthy"
        ),
        expect={"mig_mode": True},
    ),
    "mig-expected-hopper-links-off": Fault(
        ("h100-sxm-8x",),
        mig_on_all(8, fabric_state=1),
        {},
        source=(
            f"{MIG_DRIVER}: with MIG enabled no NVLink is enabled and the GPU is not probed into "
            "the NVLink fabric; the expectations ask for MIG, so links off and fabric "
            "NOT_STARTED are healthy"
        ),
        expect={"mig_mode": True},
    ),
    # -- 6. NVML recovery actions 5-7 and newer ------------------------------------------------
    "recovery-action-recover-imex-domain": Fault(
        ("h200-8x",),
        recovery(5, gpu=1),
        {"gpu.recovery_action": "DRAIN"},
        source=(
            f"{RECOVERY}: the IMEX domain spans nodes; the node leaves service while the domain "
            "is recovered (DRAIN): no local reset or reboot recovers a domain"
        ),
    ),
    "recovery-action-bus-reset": Fault(
        ("h100-sxm-8x",),
        recovery(6, gpu=2),
        {"gpu.recovery_action": "REBOOT"},
        source=(
            f"{RECOVERY}: a PCIe bus reset is more than a GPU reset (nvidia-smi -r); the "
            "weakest imagectl action that includes it is a reboot"
        ),
    ),
    "recovery-action-system-reboot": Fault(
        ("a100-sxm-80gb-8x",),
        recovery(7, gpu=0),
        {"gpu.recovery_action": "REBOOT"},
        source=f"{RECOVERY}: SYSTEM_REBOOT, reboot the system",
    ),
    "recovery-action-newer-than-known": Fault(
        ("h100-sxm-8x",),
        recovery(12, gpu=6),
        {"gpu.recovery_action": "DRAIN"},
        source=(
            f"{RECOVERY}; a value newer than 7 is an action this validator cannot name: never "
            "weaker than a reboot, the host is drained until a person reads what the driver asks"
        ),
    ),
    "recovery-action-cleared": Fault(
        ("h100-sxm-8x",),
        xid_lines(
            154,
            "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
            gpu=3,
            pids=(0,),
            name="<unknown>",
        ),
        {},
        source=(
            f"{CAT}: Xid 154 GPU_RECOVERY_ACTION_CHANGED, XID_154: follow the action its text "
            f"names, here 'None'; NVML's recovery action reads 0 (NONE): healthy ({RECOVERY})"
        ),
    ),
    # -- 7. evidence that cannot be read ---------------------------------------------------
    "kernel-log-unreadable": Fault(
        ("h100-sxm-8x", "h200-8x"),
        kernel_log_unreadable(UNREADABLE),
        {"kernel.xid": "DRAIN", "kernel.sxid": "DRAIN"},
        source=(
            f"imagectl policy: without this boot's kernel log the XIDs ({CAT}) and SXids ({FM}) "
            "are unknown; the host is not cleared on evidence it could not read (DRAIN: a "
            "person reads the log)"
        ),
    ),
    "kernel-log-unreadable-single-gpu": Fault(
        ("l4-1x",),
        kernel_log_unreadable(UNREADABLE),
        {"kernel.xid": "DRAIN"},
        source=(
            f"imagectl policy: without this boot's kernel log the XIDs ({CAT}) are unknown "
            "(DRAIN); a shape without NVSwitch has no SXids to read (kernel.sxid skips)"
        ),
    ),
    "kernel-log-from-dmesg": Fault(
        ("l4-1x", "h100-sxm-8x"),
        lambda s: s.update(
            kernel_log={
                "source": "dmesg",
                "error": None,
                "filtered": True,
                "text": "[    5.120431] nvidia: loading out-of-tree module taints kernel.\n"
                "[    5.301877] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  "
                "580.95.05  Release Build  (dvs-builder@U22-I3-AF03-09-1)\n",
            }
        ),
        {},
        source=(
            "util-linux dmesg: the kernel ring buffer of this boot; journalctl failing is not "
            "a fault when dmesg answers (kernel_log.read_host_log falls back to it)"
        ),
    ),
}
