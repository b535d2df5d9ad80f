"""Generate the snapshot library: four healthy hosts and faulty variants, one fault each.

Run from the repository root:  .venv/bin/python tests/snapshots/make_snapshots.py
The generated JSON files are committed too, so the library is reviewable and reproducible.

- ``healthy/<base>.json``: a healthy host (values as NVML reports them on that hardware).
- ``expect/<base>.json``: the expectations the base is judged against (from the real
  h100-training stack's pins and the shape table); also recorded in each snapshot as the
  image's ``/etc/imagectl/expect.json``, so ``imagectl validate --replay FILE`` alone
  judges it as the host would.
- ``faults/<base>--<fault>.json``: the base with one named fault applied (``FAULTS``).
- ``cases.json``: for every snapshot, its base and the checks that must fail with which
  action (empty for healthy and ignorable ones). The test suite replays each one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from snaplib import (  # noqa: E402
    BASES,
    DRIVER,
    FIELD_RECOVERY_ACTION,
    FM,
    OLD,
    SRAM,
    T_FIRST_BOOT,
    A,
    Fault,
    Snap,
    U,
    V,
    _log,
    both,
    drop_calls,
    drop_gpu,
    expectations,
    factor_common,
    gpu_set,
    healthy,
    host_set,
    nvml_init_error,
    xid,
)

# name -> Fault (snaplib.Fault): ids not in expect_fail must pass, except checks failing
# only because NVML is unavailable (root cause nvml.init). Each class of fault added later
# lives in its own module (faults_*.py) and is merged below.
FAULTS: dict[str, Fault] = {
    "xid79-fallen-off-bus": Fault(
        ("h100-sxm-8x", "h200-8x"),
        xid(79, "GPU has fallen off the bus."),
        {"kernel.xid": "REBOOT"},
        source=(
            "NVIDIA Xid Catalog: Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS, immediate "
            "action RESTART_BM (restart bare metal: REBOOT)"
        ),
    ),
    "xid48-row-remap-pending": Fault(
        ("h100-sxm-8x",),
        both(
            xid(
                48,
                "An uncorrectable double bit error (DBE) has been detected on GPU in the "
                "framebuffer at partition 6, subpartition 0.",
            ),
            gpu_set("nvmlDeviceGetRemappedRows", [0, 1, 1, 0], gpu=3),
            gpu_set("nvmlDeviceGetTotalEccErrors", 1, gpu=3, key=f"{U},{V}"),
            gpu_set("nvmlDeviceGetTotalEccErrors", 1, gpu=3, key=f"{U},{A}"),
        ),
        {
            "kernel.xid": "RESET_GPU",
            "gpu.row_remap.pending": "RESET_GPU",
            "gpu.ecc.volatile_uncorrected": "RESET_GPU",
        },
        source=(
            "NVIDIA Xid Catalog: Xid 48 ROBUST_CHANNEL_GPU_ECC_DBE, WORKFLOW_XID_48: solo "
            "RESET_GPU; NVML nvmlDeviceGetRemappedRows: a pending remap needs a GPU reset"
        ),
    ),
    "row-remap-failure": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        gpu_set("nvmlDeviceGetRemappedRows", [3, 512, 0, 1], gpu=5),
        {"gpu.row_remap.failure": "ISOLATE_RMA"},
        source=(
            "NVIDIA GPU Memory Error Management (row remapping): a remapping failure means the "
            "GPU should be replaced; DCGM DCGM_FR_ROW_REMAP_FAILURE"
        ),
    ),
    "row-remap-uncorrectable-over-512": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetRemappedRows", [0, 600, 0, 0], gpu=1),
        {"gpu.row_remap.uncorrectable": "ISOLATE_RMA"},
        source=(
            "NVIDIA GPU Memory Error Management: 512 remappable rows per bank set; AzHC "
            "nd96isr_h100_v5.conf fails above 512"
        ),
    ),
    "ecc-volatile-uncorrected": Fault(
        ("h100-sxm-8x",),
        both(
            gpu_set("nvmlDeviceGetTotalEccErrors", 2, gpu=4, key=f"{U},{V}"),
            gpu_set("nvmlDeviceGetTotalEccErrors", 2, gpu=4, key=f"{U},{A}"),
        ),
        {"gpu.ecc.volatile_uncorrected": "RESET_GPU"},
        source=(
            "NVML nvmlDeviceGetTotalEccErrors (volatile uncorrected > 0); AWS GPU healthcheck and"
            " Imbue: reset the GPU"
        ),
    ),
    "ecc-sram-uncorrectable": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetMemoryErrorCounter", 1, gpu=6, key=f"{U},{A},{SRAM}"),
        {},
        expect_warn=("gpu.ecc.sram",),
        source=(
            "NVIDIA GPU Memory Error Management, RMA Policy Thresholds for SRAM Failure Modes: "
            "RMA needs the SRAM Threshold Exceeded flag (more than 2 SEC-DED unique "
            "uncorrectable errors in a bank), not one aggregate error: recorded as a warning "
            "(AzHC fails any: imagectl policy keeps it a warning)"
        ),
    ),
    "ecc-disabled": Fault(
        ("h100-sxm-8x", "l4-1x"),
        both(gpu_set("nvmlDeviceGetCurrentEccMode", 0), gpu_set("nvmlDeviceGetPendingEccMode", 0)),
        {"gpu.ecc.mode": "REBOOT"},
        source=(
            "NVML nvmlDeviceGetCurrentEccMode; enabling ECC takes effect after a reboot (nvidia-"
            "smi -e 1)"
        ),
    ),
    "ecc-pending-mode-change": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetPendingEccMode", 0, gpu=2),
        {"gpu.ecc.pending": "REBOOT"},
        source="NVML nvmlDeviceGetPendingEccMode: the mode changes at the next reboot",
    ),
    "hw-slowdown": Fault(
        ("h100-sxm-8x", "l4-1x"),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x8),
        {"gpu.clocks.events": "DRAIN"},
        source=(
            "NVML clocks event reasons (nvmlClocksEventReasonHwSlowdown 0x8); gpud / Autopilot: "
            "HW slowdown is a fault"
        ),
    ),
    "hw-thermal-slowdown": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x40 | 0x20),
        {"gpu.clocks.events": "DRAIN"},
        source="NVML clocks event reasons (HwThermalSlowdown 0x40); gpud / Autopilot",
    ),
    "hw-power-brake": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x80),
        {"gpu.clocks.events": "DRAIN"},
        source="NVML clocks event reasons (HwPowerBrakeSlowdown 0x80); gpud / Autopilot",
    ),
    "temperature-over-slowdown": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetTemperature", 90, gpu=7, key="0"),
        {"gpu.temperature": "DRAIN"},
        source="NVML nvmlDeviceGetTemperatureThreshold(NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)",
    ),
    "pcie-gen3-x8": Fault(
        ("h100-sxm-8x",),
        both(
            gpu_set("nvmlDeviceGetMaxPcieLinkGeneration", 3, gpu=2),
            gpu_set("nvmlDeviceGetMaxPcieLinkWidth", 8, gpu=2),
            gpu_set("nvmlDeviceGetCurrPcieLinkGeneration", 3, gpu=2),
            gpu_set("nvmlDeviceGetCurrPcieLinkWidth", 8, gpu=2),
        ),
        {"gpu.pcie.link_max": "DRAIN"},
        source=(
            "NVML nvmlDeviceGetMaxPcieLinkGeneration/Width against the shape "
            "(images/catalog/shapes.yaml)"
        ),
    ),
    "gpu-missing-7-of-8": Fault(
        ("h100-sxm-8x",),
        drop_gpu(7),
        {"gpu.count": "DRAIN"},
        source=(
            "images/catalog/shapes.yaml gpu count; NVML nvmlDeviceGetCount; NVIDIA Health "
            "Validation gpu_count: drain, then reset_gpu -> restart_os -> service_required"
        ),
    ),
    "nvlink-inactive": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetNvLinkState", 0, gpu=2, key="5"),
        {"gpu.nvlink.active": "RESET_GPU"},
        source="NVML nvmlDeviceGetNvLinkState; AzHC: every NVLink link active on an NVSwitch box",
    ),
    "nvlink-crc-errors": Fault(
        ("h100-sxm-8x",),
        # 45,000 CRC flit errors on link 4 in the 300 s since boot: 150 per second
        gpu_set("nvmlDeviceGetNvLinkErrorCounter", 45_000, gpu=1, key="4,2"),
        {"gpu.nvlink.errors": "RESET_GPU"},
        source=(
            "NVIDIA DCGM health watch (MonitorNVLink): CRC flit/data errors fail at 100 per "
            "second (dcgm_gpu_hardware_limits.h DCGM_LIMIT_MAX_NVLINK_CRC_ERROR)"
        ),
    ),
    "fabric-manager-not-running": Fault(
        ("h100-sxm-8x",),
        both(
            host_set(
                "services.nvidia-fabricmanager",
                {"active": False, "state": "failed", "enabled": True},
            ),
            gpu_set(
                "nvmlDeviceGetGpuFabricInfoV",
                {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 0, "state": 1, "healthMask": 0},
                gpu=None,
            ),
            gpu_set(
                "nvmlDeviceGetGpuFabricInfo",
                {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 0, "state": 1},
                gpu=None,
            ),
        ),
        {"sw.fabricmanager.active": "REBOOT", "gpu.fabric.state": "REBOOT"},
        source=(
            "NVIDIA Fabric Manager user guide: NVSwitch systems need nvidia-fabricmanager; NVML "
            "nvmlDeviceGetGpuFabricInfoV state"
        ),
    ),
    "fabric-manager-version-mismatch": Fault(
        ("h100-sxm-8x",),
        host_set(f"packages.{FM}", {"version": f"{OLD}-1", "held": True, "installed": True}),
        {
            "sw.fabricmanager.version": "BLOCK_IMAGE",
            "sw.packages.pinned": "BLOCK_IMAGE",
            "sw.manifest.agrees": "BLOCK_IMAGE",
        },
        source=(
            "NVIDIA Fabric Manager user guide: the fabric manager version must equal the driver's"
        ),
    ),
    "fabric-state-in-progress": Fault(
        ("h100-sxm-8x",),
        gpu_set(
            "nvmlDeviceGetGpuFabricInfoV",
            {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 0, "state": 2, "healthMask": 0},
            gpu=4,
        ),
        {"gpu.fabric.state": "REBOOT"},
        source="NVML nvmlGpuFabricInfoV_t.state NVML_GPU_FABRIC_STATE_IN_PROGRESS",
    ),
    "persistence-off": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetPersistenceMode", 0, gpu=None),
        {"gpu.persistence_mode": "BLOCK_IMAGE"},
        source=(
            "NVIDIA driver persistence (nvidia-persistenced) documentation; the image must enable"
            " it"
        ),
    ),
    "driver-library-mismatch": Fault(
        ("h100-sxm-8x",),
        both(
            nvml_init_error("LIB_RM_VERSION_MISMATCH"),
            host_set(
                "nvidia_module",
                {
                    "loaded": True,
                    "version": OLD,
                    "flavour": "open",
                    "source": "/proc/driver/nvidia/version",
                },
            ),
            lambda s: _log(
                s,
                f"NVRM: API mismatch: the client has the version {DRIVER}, but NVRM: this "
                f"kernel module has the version {OLD}.  Please make sure that this kernel "
                "module and all NVIDIA driver components have the same version.",
            ),
        ),
        {"nvml.init": "REBOOT", "sw.driver.library_match": "REBOOT"},
        source=(
            "NVML NVML_ERROR_LIB_RM_VERSION_MISMATCH: user-space and kernel module differ (reboot"
            " loads the installed module)"
        ),
    ),
    "nvml-library-missing": Fault(
        ("h100-sxm-8x",),
        both(
            nvml_init_error("LIBRARY_NOT_FOUND"),
            host_set("nvml_library", {"path": None, "version": None}),
        ),
        {"nvml.init": "BLOCK_IMAGE"},
        source="NVML NVML_ERROR_LIBRARY_NOT_FOUND: the image lacks libnvidia-ml",
    ),
    "driver-not-loaded": Fault(
        ("h100-sxm-8x",),
        both(
            nvml_init_error("DRIVER_NOT_LOADED"),
            host_set(
                "nvidia_module",
                {
                    "loaded": False,
                    "installed": False,
                    "version": None,
                    "flavour": None,
                    "source": "modinfo nvidia",
                },
            ),
        ),
        {
            "nvml.init": "BLOCK_IMAGE",
            "sw.driver.version": "BLOCK_IMAGE",
            "sw.kernel.module_flavour": "BLOCK_IMAGE",
        },
        source=(
            "NVML NVML_ERROR_DRIVER_NOT_LOADED with no module installed: the image lacks the driver"
        ),
    ),
    "wrong-driver-version": Fault(
        ("h100-sxm-8x",),
        both(
            lambda s: s["nvml"]["system"].update(nvmlSystemGetDriverVersion=OLD),
            host_set("nvidia_module.version", OLD),
            host_set("nvml_library.version", OLD),
        ),
        {"sw.driver.version": "BLOCK_IMAGE", "sw.fabricmanager.version": "BLOCK_IMAGE"},
        source="the stack's driver pin (images/stacks/h100-training.yaml)",
    ),
    "mig-enabled": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetMigMode", [1, 1], gpu=0),
        {"gpu.mig_mode": "RESET_GPU"},
        source="NVML nvmlDeviceGetMigMode; MIG mode changes need a GPU reset",
    ),
    "nccl-unpinned": Fault(
        ("h100-sxm-8x",),
        both(
            host_set("nccl.version", "2.21.5"),
            host_set(
                "packages.libnccl2",
                {"version": "2.21.5-1+cuda12.4", "held": False, "installed": True},
            ),
        ),
        {
            "sw.nccl.version": "BLOCK_IMAGE",
            "sw.packages.pinned": "BLOCK_IMAGE",
            "sw.packages.held": "BLOCK_IMAGE",
            "sw.manifest.agrees": "BLOCK_IMAGE",
        },
        source="the stack's NCCL pin (images/stacks/h100-training.yaml)",
    ),
    "kernel-not-pinned": Fault(
        ("h100-sxm-8x",),
        host_set("kernel_release", "6.8.0-1040-aws"),
        {"sw.kernel.release": "BLOCK_IMAGE"},
        source="the stack's kernel pin (images/stacks/h100-training.yaml)",
    ),
    "proprietary-modules": Fault(
        ("h100-sxm-8x",),
        host_set("nvidia_module.flavour", "proprietary"),
        {"sw.kernel.module_flavour": "BLOCK_IMAGE"},
        source=(
            "the stack's kernel_modules pin; NVIDIA: H100 and newer are supported by the open "
            "modules"
        ),
    ),
    "inforom-corrupt": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceValidateInforom", {"$error": "CORRUPTED_INFOROM"}, gpu=6),
        {"gpu.inforom": "ISOLATE_RMA"},
        source="NVML nvmlDeviceValidateInforom: NVML_ERROR_CORRUPTED_INFOROM",
    ),
    "recovery-action-reboot": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetFieldValues", 2, gpu=0, key=str(FIELD_RECOVERY_ACTION)),
        {"gpu.recovery_action": "REBOOT"},
        source=(
            "NVML field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = NVML_GPU_RECOVERY_ACTION_NODE_REBOOT"
        ),
    ),
    "xid64-repeated": Fault(
        ("h100-sxm-8x",),
        xid(64, "Row remapper error.", times=2),
        {"kernel.xid": "RESET_GPU"},
        source=(
            "NVIDIA Xid Catalog: Xid 64 INFOROM_DRAM_RETIREMENT_FAILURE, immediate action "
            "RESET_GPU; two lines in one boot are one incident (ISOLATE_RMA only when the "
            "previous boot had it too)"
        ),
    ),
    "xid154-drain-and-reset": Fault(
        ("h100-sxm-8x",),
        xid(154, "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)"),
        {"kernel.xid": "DRAIN"},
        source=(
            "NVIDIA Xid Catalog: Xid 154 GPU_RECOVERY_ACTION_CHANGED, bucket XID_154: follow the "
            "action its text names ('Drain and Reset': DRAIN)"
        ),
    ),
    "sxid-fatal": Fault(
        ("h100-sxm-8x",),
        lambda s: _log(
            s, "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 12 LTSSM Fault Up"
        ),
        {"kernel.sxid": "RESET_GPU"},
        source=(
            "NVIDIA Fabric Manager user guide (NVSwitch errors): a fatal SXid needs the GPUs and "
            "NVSwitches of the baseboard reset (RESET_GPU), then a reboot if it persists"
        ),
    ),
    "ssh-host-keys-baked": Fault(
        ("h100-sxm-8x",),
        host_set(
            "hygiene.ssh_host_keys",
            [{"path": "/etc/ssh/ssh_host_rsa_key", "size": 2602, "mtime": T_FIRST_BOOT - 86400}],
        ),
        {"image.ssh_host_keys": "BLOCK_IMAGE"},
        source=(
            "imagectl image hygiene: SSH host keys older than the first boot were baked into the "
            "image"
        ),
    ),
    "cloud-credentials": Fault(
        ("h100-sxm-8x",),
        host_set(
            "hygiene.credentials",
            [{"path": "/root/.aws/credentials", "size": 116, "mtime": T_FIRST_BOOT - 3600}],
        ),
        {"image.credentials": "BLOCK_IMAGE"},
        source="imagectl image hygiene: no cloud credentials in an image",
    ),
    "shell-history-baked": Fault(
        ("h100-sxm-8x",),
        host_set(
            "hygiene.shell_history",
            [{"path": "/root/.bash_history", "size": 2048, "mtime": T_FIRST_BOOT - 600}],
        ),
        {"image.shell_history": "BLOCK_IMAGE"},
        source="imagectl image hygiene: no shell history from the build",
    ),
    "memory-missing": Fault(
        ("h100-sxm-8x",),
        gpu_set(
            "nvmlDeviceGetMemoryInfo",
            {"total": 40 * 2**30, "free": 39 * 2**30, "used": 2**30},
            gpu=3,
        ),
        {"gpu.memory": "ISOLATE_RMA"},
        source="images/compat/gpus.yaml memory per SKU; NVML nvmlDeviceGetMemoryInfo",
    ),
    "power-capped": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetEnforcedPowerLimit", 500_000, gpu=2),
        {"gpu.power.limit": "REBOOT"},
        source="images/catalog/shapes.yaml power limit; NVML nvmlDeviceGetEnforcedPowerLimit",
    ),
    # ignorable: these must pass
    "old-driver-without-newer-calls": Fault(
        ("h100-sxm-8x",),
        drop_calls(
            "nvmlDeviceGetGpuFabricInfoV",
            "nvmlDeviceGetFieldValues",
            "nvmlDeviceGetMemoryErrorCounter",
            "nvmlDeviceGetRemappedRows",
        ),
        {},
        source=(
            "NVML: NVML_ERROR_FUNCTION_NOT_FOUND on an older driver means the call does not "
            "exist, not a fault"
        ),
    ),
    "xid63-row-remap-event": Fault(
        ("h100-sxm-8x",),
        xid(63, "Row Remapper: New row marked for remapping, reset gpu to activate."),
        {},
        source="NVIDIA Xid Catalog: Xid 63 INFOROM_DRAM_RETIREMENT_EVENT, IGNORE",
    ),
    "xid92-high-sbe-rate": Fault(
        ("h100-sxm-8x",),
        xid(92, "High single-bit ECC error rate."),
        {},
        source="NVIDIA Xid Catalog: Xid 92 EXCESSIVE_SBE_INTERRUPTS, IGNORE",
    ),
    "sw-power-cap": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x4, gpu=None),
        {},
        source="NVML clocks event reasons: SwPowerCap (0x4) is normal operation",
    ),
    "idle-clocks": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x1, gpu=None),
        {},
        source="NVML clocks event reasons: GpuIdle (0x1) is normal",
    ),
    "idle-pcie-downtrained": Fault(
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrPcieLinkGeneration", 1, gpu=None),
        {},
        source=(
            "PCIe link speed drops at idle to save power (NVML nvmlDeviceGetCurrPcieLinkGeneration)"
        ),
    ),
}


def all_faults() -> dict[str, Fault]:
    """FAULTS plus every fault-class module beside this file (faults_*.py)."""
    import importlib

    merged = dict(FAULTS)
    for path in sorted(HERE.glob("faults_*.py")):
        module = importlib.import_module(path.stem)
        for name, fault in module.FAULTS.items():
            if name in merged:
                raise SystemExit(f"{path.name}: fault {name!r} is defined twice")
            merged[name] = fault
    return merged


def factored(snap: Snap) -> Snap:
    snap["nvml"] = factor_common(snap["nvml"])
    return snap


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


ACTIONS = ["NONE", "RESTART_APP", "RESET_GPU", "REBOOT", "DRAIN", "ISOLATE_RMA", "BLOCK_IMAGE"]


def case(base: str, name: str | None, fault: Fault | None) -> dict[str, Any]:
    """One cases.json entry: the verdict and worst action the validator must give, and why.
    A fault that changes the expectations names its own expect file (``expect``)."""
    fails = fault.expect_fail if fault else {}
    own = {"expect": f"expect/{base}--{name}.json"} if fault and fault.expect else {}
    return {
        **own,
        "base": base,
        "fault": name,
        "expect_fail": fails,
        "expect_warn": sorted(fault.expect_warn) if fault else [],
        "verdict": "fail" if fails else "pass",
        "worst_action": max(fails.values(), key=ACTIONS.index) if fails else "NONE",
        "source": fault.source if fault else "a healthy host of this shape",
        "profile": fault.profile if fault else "boot",
    }


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    out = parser.parse_args().out
    cases: dict[str, Any] = {}
    for base in BASES:
        write(out / "expect" / f"{base}.json", expectations(base))
        write(out / "healthy" / f"{base}.json", factored(healthy(base)))
        cases[f"healthy/{base}.json"] = case(base, None, None)
    for name, fault in all_faults().items():
        for base in fault.bases:
            snap = healthy(base)
            if fault.expect:  # judged against its own expectations (also the image's file)
                expect = {**expectations(base), **fault.expect}
                expect["origin"] = f"tests/snapshots/expect/{base}--{name}.json"
                write(out / "expect" / f"{base}--{name}.json", expect)
                snap["host"]["expect_file"] = expect
            fault.apply(snap)
            snap["description"] = f"{base} with one fault: {name}"
            path = f"faults/{base}--{name}.json"
            write(out / path, factored(snap))
            cases[path] = case(base, name, fault)
    write(out / "cases.json", cases)
    print(f"{len(cases)} snapshots under {out}")


if __name__ == "__main__":
    main()
