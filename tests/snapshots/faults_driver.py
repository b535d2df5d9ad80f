"""Kernel messages the driver writes without an Xid, and Xid 154 read by its latest line.

- A GPU that fell off the bus before the driver initialised it prints three ``NVRM:`` lines
  and no Xid (open-gpu-kernel-modules osapi.c ``rm_is_supported_device``); NVML then lists
  one GPU fewer. Sick: the lines and the GPU gone; control: the lines of an earlier boot.
- ``RmInitAdapter failed! (init:status:line)`` (osinit.c ``RmInitAdapter``): a GPU class
  reboots; the firmware class (0x6x) blocks the image.
- The NVLink core's ``Unable to set link state to ACTIVE`` (nvlink_training.c, printed as
  ``nvidia-nvlink:``): reset the GPU.
- An NVSwitch that fails to initialise (linux_nvswitch.c ``nvswitch_init_device``): reboot.
- Xid 154 names the recovery action changing from one value to another: the latest line is
  the GPU's action now, not the strongest line of the boot.

Every message is quoted as the driver's format string prints it
(validators/data/kernel_messages.yaml cites file and function).
"""

from __future__ import annotations

from collections.abc import Callable

from snaplib import Fault, Snap, both, drop_gpu, log_line, xid_lines

SRC = "NVIDIA/open-gpu-kernel-modules 595.45.04"
CAT = "NVIDIA Xid Catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"
GONE = "0000:db:00.0"  # GPU 7 of the H100 base (snaplib H100_BUSES)


def _probe_lines(bus: str, stamp: str = "2026-11-20T10:00:03+0000") -> Callable[[Snap], None]:
    """The driver's three lines for a GPU whose registers read all ones at probe, and the
    kernel's probe failure after them (drivers/base/dd.c)."""
    return both(
        log_line(f"NVRM: The NVIDIA GPU {bus}", stamp),
        log_line("NVRM: (PCI ID: 10de:2330) installed in this system has", stamp),
        log_line("NVRM: fallen off the bus and is not responding to commands.", stamp),
        log_line(f"nvidia {bus}: probe with driver nvidia failed with error -1", stamp),
    )


FAULTS: dict[str, Fault] = {
    "fallen-off-bus-at-probe": Fault(
        ("h100-sxm-8x",),
        both(drop_gpu(7), _probe_lines(GONE)),
        {"gpu.count": "DRAIN", "kernel.messages": "REBOOT"},
        source=(
            f"{SRC} src/nvidia/arch/nvalloc/unix/src/osapi.c rm_is_supported_device(): "
            "NV_PMC_BOOT_0/42 read 0xFFFFFFFF -> 'The NVIDIA GPU ... has fallen off the bus and "
            "is not responding to commands.' and no Xid; the Xid Catalog's action for the same "
            "fault (Xid 79): RESTART_BM (REBOOT)"
        ),
    ),
    "fallen-off-bus-at-probe-earlier-boot": Fault(
        ("h100-sxm-8x",),
        both(
            log_line("-- Boot 0a0b0c0d11112222333344445555666 --", stamp=""),
            _probe_lines(GONE, stamp="2026-11-19T22:10:00+0000"),
            log_line("-- Boot 9f1c1111222233334444555566667777 --", stamp=""),
            log_line("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05"),
        ),
        {},
        source=(
            f"{SRC} osapi.c rm_is_supported_device(); a message of an earlier boot, with every "
            "GPU back in this one, is history (journalctl -k -b: this boot only)"
        ),
    ),
    "fallen-off-bus-at-probe-both-boots": Fault(
        ("h100-sxm-8x",),
        both(
            drop_gpu(7),
            log_line("-- Boot 0a0b0c0d11112222333344445555666 --", stamp=""),
            _probe_lines(GONE, stamp="2026-11-19T22:10:00+0000"),
            log_line("-- Boot 9f1c1111222233334444555566667777 --", stamp=""),
            _probe_lines(GONE),
        ),
        {"gpu.count": "DRAIN", "kernel.messages": "ISOLATE_RMA"},
        source=(
            f"{SRC} osapi.c rm_is_supported_device(): the same GPU fell off the bus at probe "
            f"in the previous boot too: the reboot did not clear it; {CAT}: Xid 79 'If this "
            "error is seen repeatedly ... contact your hardware vendor' (ISOLATE_RMA)"
        ),
    ),
    "rm-init-adapter-failed": Fault(
        ("h100-sxm-8x",),
        both(
            drop_gpu(7),
            log_line(f"NVRM: GPU {GONE}: RmInitAdapter failed! (0x22:0x40:894)"),
            log_line(f"NVRM: GPU {GONE}: rm_init_adapter failed, device minor number 7"),
        ),
        {"gpu.count": "DRAIN", "kernel.messages": "REBOOT"},
        source=(
            f"{SRC} src/nvidia/arch/nvalloc/unix/src/osinit.c RmInitAdapter(): 'RmInitAdapter "
            "failed! (0x%x:0x%x:%d)' with rm_init_status 0x22 RM_INIT_GPU_GPUMGR_ATTACH_GPU_FAILED"
            " (a GPU error): the GPU never initialised; reboot"
        ),
    ),
    "rm-init-adapter-firmware-failed": Fault(
        ("h100-sxm-8x",),
        both(
            drop_gpu(7),
            log_line(f"NVRM: GPU {GONE}: RmInitAdapter failed! (0x61:0x56:1750)"),
        ),
        {"gpu.count": "DRAIN", "kernel.messages": "BLOCK_IMAGE"},
        source=(
            f"{SRC} osinit.c RmInitAdapter(): rm_init_status 0x61 "
            "RM_INIT_FIRMWARE_FETCH_FAILED (the rm firmware errors, 0x60-0x63): the GSP firmware "
            "the image ships does not load for its driver, on every host of the image"
        ),
    ),
    "nvlink-core-training-failed": Fault(
        ("h100-sxm-8x",),
        log_line(
            "nvidia-nvlink: nvlink_core_train_internode_conns_from_swcfg_to_active: Unable to "
            "set link state to ACTIVE for link NVIDIA H100 80GB HBM3 (0000:18:00.0):link5 "
        ),
        {"kernel.messages": "RESET_GPU"},
        source=(
            f"{SRC} src/common/nvlink/kernel/nvlink/core/nvlink_training.c (NVLINK_DBG_LEVEL_"
            "ERRORS '%s: Unable to set link state to ACTIVE for link %s:%s'), printed by "
            "kernel-open/nvidia/nvlink_linux.c nvlink_print() as 'nvidia-nvlink: '; "
            f"{CAT}: Xid 136 ALI_TRAINING_FAIL, RESET_GPU"
        ),
    ),
    "nvswitch-init-failed": Fault(
        ("h100-sxm-8x",),
        log_line("nvidia-nvswitch2: Failed to initialize device : -5"),
        {"kernel.messages": "REBOOT"},
        source=(
            f"{SRC} kernel-open/nvidia/linux_nvswitch.c nvswitch_init_device(): printk(KERN_ERR "
            "'%s: Failed to initialize device : %d'); NVIDIA Fabric Manager User Guide: the "
            "fabric needs every NVSwitch of the baseboard"
        ),
    ),
    # -- Xid 154: the latest line decides ---------------------------------------------
    "xid154-latest-clears": Fault(
        ("h100-sxm-8x",),
        both(
            xid_lines(
                154,
                "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
                gpu=2,
                pids=(0,),
                stamp="2026-11-20T10:03:00+0000",
            ),
            xid_lines(
                154,
                "GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)",
                gpu=2,
                pids=(0,),
                stamp="2026-11-20T10:04:00+0000",
            ),
        ),
        {},
        source=(
            f"{CAT}: Xid 154 GPU_RECOVERY_ACTION_CHANGED, bucket XID_154: follow the action its "
            "text names; each line names the change from the previous action to the new one, so "
            "the latest line is the GPU's action now (here None: nothing to do)"
        ),
    ),
    "xid154-latest-weaker": Fault(
        ("h100-sxm-8x",),
        both(
            xid_lines(
                154,
                "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
                gpu=2,
                pids=(0,),
                stamp="2026-11-20T10:03:00+0000",
            ),
            xid_lines(
                154,
                "GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU "
                "Reset Required)",
                gpu=2,
                pids=(0,),
                stamp="2026-11-20T10:04:00+0000",
            ),
        ),
        {"kernel.xid": "RESET_GPU"},
        source=(
            f"{CAT}: Xid 154 GPU_RECOVERY_ACTION_CHANGED: the latest line names GPU Reset "
            "Required (the drain the earlier line named was replaced)"
        ),
    ),
}
