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

import copy
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

sys.path.insert(0, str(ROOT))

from imagectl.validators.expectations import _shape_fields, from_stack  # noqa: E402
from imagectl.validators.nvml.calls import (  # noqa: E402
    AGGREGATE,
    CORRECTED,
    DRAM,
    FIELD_RECOVERY_ACTION,
    NVLINK_COUNTERS,
    NVLINK_MAX_LINKS,
    SRAM,
    UNCORRECTED,
    VOLATILE,
)
from imagectl.validators.snapshot import factor_common  # noqa: E402

DRIVER = "580.95.05"
T_FIRST_BOOT = 1_790_000_000.0  # first boot of the instance (epoch seconds)
T_BOOT = T_FIRST_BOOT + 3600.0

BASES: dict[str, dict[str, Any]] = {
    "h100-sxm-8x": {
        "shape": "p5.48xlarge",
        "name": "NVIDIA H100 80GB HBM3",
        "count": 8,
        "mem_mib": 81559,
        "arch": 9,
        "pcie": (5, 16),
        "links": 18,
        "power_w": 700,
        "slowdown": 89,
        "shutdown": 92,
        "gpu_max": 87,
        "vbios": "96.00.89.00.01",
        "inforom": "G520.0200.00.05",
        "nvswitch": True,
        "image": "ami-0h100healthy0001",
        "buses": ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"],
    },
    "a100-sxm-80gb-8x": {
        "shape": "p4de.24xlarge",
        "name": "NVIDIA A100-SXM4-80GB",
        "count": 8,
        "mem_mib": 81920,
        "arch": 7,
        "pcie": (4, 16),
        "links": 12,
        "power_w": 400,
        "slowdown": 92,
        "shutdown": 95,
        "gpu_max": 90,
        "vbios": "92.00.45.00.06",
        "inforom": "G506.0212.00.02",
        "nvswitch": True,
        "image": "ami-0a100healthy0001",
        "buses": ["10", "16", "20", "27", "90", "96", "a0", "a7"],
    },
    "h200-8x": {
        "shape": "p5e.48xlarge",
        "name": "NVIDIA H200",
        "count": 8,
        "mem_mib": 143771,
        "arch": 9,
        "pcie": (5, 16),
        "links": 18,
        "power_w": 700,
        "slowdown": 89,
        "shutdown": 92,
        "gpu_max": 87,
        "vbios": "96.00.A5.00.01",
        "inforom": "G525.0201.00.01",
        "nvswitch": True,
        "image": "ami-0h200healthy0001",
        "buses": ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"],
    },
    "l4-1x": {
        "shape": "g6.xlarge",
        "name": "NVIDIA L4",
        "count": 1,
        "mem_mib": 23034,
        "arch": 8,
        "pcie": (4, 16),
        "links": 0,
        "power_w": 72,
        "slowdown": 94,
        "shutdown": 101,
        "gpu_max": 89,
        "vbios": "95.04.29.00.06",
        "inforom": "G193.0200.00.01",
        "nvswitch": False,
        "image": "ami-0l4healthy000001",
        "buses": ["31"],
    },
}


def expectations(base: str) -> dict[str, Any]:
    return copy.deepcopy(_expectations(base))


@functools.cache
def _expectations(base: str) -> dict[str, Any]:
    b = BASES[base]
    e = from_stack(ROOT / "images", "h100-training", "p5.48xlarge")
    if b["shape"] != "p5.48xlarge":
        e = e.model_copy(update=_shape_fields(ROOT / "images", b["shape"]))
    if not b["nvswitch"]:
        pkgs = {k: v for k, v in e.packages.items() if not k.startswith("nvidia-fabricmanager")}
        e = e.model_copy(update={"fabric_manager": None, "packages": pkgs, "held": sorted(pkgs)})
    e = e.model_copy(update={"origin": f"tests/snapshots/expect/{base}.json"})
    return e.model_dump(mode="json")


def _device(b: dict[str, Any], i: int) -> dict[str, Any]:
    gen, width = b["pcie"]
    bus = b["buses"][i]
    links = b["links"]
    ecc_totals = {f"{e},{c}": 0 for e in (CORRECTED, UNCORRECTED) for c in (VOLATILE, AGGREGATE)}
    ecc_loc = {
        f"{e},{c},{loc}": 0
        for e in (CORRECTED, UNCORRECTED)
        for c in (VOLATILE, AGGREGATE)
        for loc in (DRAM, SRAM)
    }
    dev: dict[str, Any] = {
        "nvmlDeviceGetName": b["name"],
        "nvmlDeviceGetUUID": f"GPU-{b['shape'][:2]}{i:02d}a1b2-c3d4-e5f6-0000-00000000{i:04d}",
        "nvmlDeviceGetSerial": f"165232000{i:04d}",
        "nvmlDeviceGetArchitecture": b["arch"],
        "nvmlDeviceGetVbiosVersion": b["vbios"],
        "nvmlDeviceGetInforomImageVersion": b["inforom"],
        "nvmlDeviceValidateInforom": None,
        "nvmlDeviceGetPciInfo_v3": {
            "busIdLegacy": f"0000:{bus.upper()}:00.0",
            "domain": 0,
            "bus": int(bus, 16),
            "device": 0,
            "pciDeviceId": 0x233010DE,
            "pciSubSystemId": 0x16C110DE,
            "busId": f"00000000:{bus.upper()}:00.0",
        },
        "nvmlDeviceGetMemoryInfo": {
            "total": b["mem_mib"] * 2**20,
            "free": (b["mem_mib"] - 500) * 2**20,
            "used": 500 * 2**20,
        },
        "nvmlDeviceGetMigMode": [0, 0],
        "nvmlDeviceGetComputeMode": 0,
        "nvmlDeviceGetPersistenceMode": 1,
        "nvmlDeviceGetCurrentEccMode": 1,
        "nvmlDeviceGetPendingEccMode": 1,
        "nvmlDeviceGetTotalEccErrors": ecc_totals,
        "nvmlDeviceGetMemoryErrorCounter": ecc_loc,
        "nvmlDeviceGetRemappedRows": [0, 0, 0, 0],
        "nvmlDeviceGetRetiredPages": {"$error": "NOT_SUPPORTED"},
        "nvmlDeviceGetRetiredPagesPendingStatus": {"$error": "NOT_SUPPORTED"},
        "nvmlDeviceGetCurrentClocksEventReasons": 0x1,  # idle
        "nvmlDeviceGetTemperature": {"0": 33 + i % 3},
        "nvmlDeviceGetTemperatureThreshold": {
            "0": b["shutdown"],
            "1": b["slowdown"],
            "3": b["gpu_max"],
        },
        "nvmlDeviceGetPowerUsage": int(b["power_w"] * 0.1 * 1000),
        "nvmlDeviceGetEnforcedPowerLimit": b["power_w"] * 1000,
        "nvmlDeviceGetPowerManagementDefaultLimit": b["power_w"] * 1000,
        "nvmlDeviceGetUtilizationRates": {"gpu": 0, "memory": 0},
        "nvmlDeviceGetClockInfo": {"1": 345},
        "nvmlDeviceGetMaxClockInfo": {"1": 1980},
        # idle: the link has downtrained to Gen1 to save power (normal)
        "nvmlDeviceGetCurrPcieLinkGeneration": 1,
        "nvmlDeviceGetCurrPcieLinkWidth": width,
        "nvmlDeviceGetMaxPcieLinkGeneration": gen,
        "nvmlDeviceGetMaxPcieLinkWidth": width,
        "nvmlDeviceGetGpuMaxPcieLinkGeneration": gen,
        "nvmlDeviceGetPcieReplayCounter": 0,
        "nvmlDeviceGetFieldValues": {str(FIELD_RECOVERY_ACTION): 0},
    }
    if links:
        dev["nvmlDeviceGetNvLinkState"] = {
            str(link): (1 if link < links else {"$error": "INVALID_ARGUMENT"})
            for link in range(NVLINK_MAX_LINKS)
        }
        dev["nvmlDeviceGetNvLinkErrorCounter"] = {
            f"{link},{c}": 0 for link in range(links) for c in NVLINK_COUNTERS.values()
        }
        dev["nvmlDeviceGetGpuFabricInfoV"] = {
            "clusterUuid": [0] * 16,
            "status": 0,
            "cliqueId": 32766,
            "state": 3,
            "healthMask": 0,
        }
    else:
        dev["nvmlDeviceGetNvLinkState"] = {"$error": "NOT_SUPPORTED"}
        dev["nvmlDeviceGetNvLinkErrorCounter"] = {"$error": "NOT_SUPPORTED"}
        dev["nvmlDeviceGetGpuFabricInfoV"] = {"$error": "NOT_SUPPORTED"}
    return dev


def healthy(base: str) -> dict[str, Any]:
    b = BASES[base]
    e = expectations(base)
    packages = {
        name: {
            "version": (
                f"{v}-1"
                if name.startswith("nvidia-fabricmanager")
                else f"{v}-1"
                if name.startswith("cuda-toolkit")
                else v
            ),
            "held": True,
            "installed": True,
        }
        for name, v in e["packages"].items()
    }
    packages["nvidia-driver-580-open"] = {
        "version": f"{DRIVER}-0ubuntu1",
        "held": True,
        "installed": True,
    }
    packages["libnvidia-compute-580"] = {
        "version": f"{DRIVER}-0ubuntu1",
        "held": True,
        "installed": True,
    }
    log = (
        "2026-11-20T10:00:01+0000 host kernel: nvidia: loading out-of-tree module taints kernel.\n"
        "2026-11-20T10:00:02+0000 host kernel: NVRM: loading NVIDIA UNIX Open Kernel Module "
        f"for x86_64  {DRIVER}  Release Build  (dvs-builder@U22-I3-AF03-09-1)\n"
    )
    return {
        "schema_version": 1,
        "kind": "imagectl.snapshot",
        "description": f"healthy {base} ({b['shape']})",
        "captured_at": "2026-11-20T10:05:00+00:00",
        "validator_version": "0.1.0",
        "nvml": {
            "init": {"error": None},
            "system": {
                "nvmlSystemGetDriverVersion": DRIVER,
                "nvmlSystemGetNVMLVersion": f"13.{DRIVER}",
                "nvmlSystemGetCudaDriverVersion_v2": 13000,
                "nvmlDeviceGetCount": b["count"],
            },
            "devices": [_device(b, i) for i in range(b["count"])],
        },
        "host": {
            "hostname": f"{base}-node",
            "kernel_release": e["kernel"],
            "os_release": {
                "ID": "ubuntu",
                "VERSION_ID": "22.04",
                "PRETTY_NAME": "Ubuntu 22.04.5 LTS",
            },
            "boot": {
                "boot_id": "9f1c1111-2222-3333-4444-555566667777",
                "uptime_s": 300.0,
                "booted_at": T_BOOT,
            },
            "nvidia_module": {
                "loaded": True,
                "version": DRIVER,
                "flavour": "open",
                "source": "/proc/driver/nvidia/version",
            },
            "nvml_library": {
                "path": f"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{DRIVER}",
                "version": DRIVER,
            },
            "nccl": {
                "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                "version": e["nccl"].split("-")[0],
                "error": None,
            },
            "packages": packages,
            "services": {
                "nvidia-fabricmanager": {
                    "active": b["nvswitch"],
                    "state": "active" if b["nvswitch"] else "inactive",
                    "enabled": b["nvswitch"],
                },
                "nvidia-persistenced": {"active": True, "state": "active", "enabled": True},
                "nvidia-imex": {"active": False, "state": "inactive", "enabled": False},
            },
            "manifest": {
                "image_id": b["image"],
                "stack": e["stack"],
                "stack_digest": e["stack_digest"],
                "packages": {n: p["version"] for n, p in sorted(packages.items())},
            },
            "cloud_image": {"cloud": "aws", "image_id": b["image"]},
            # the image's own /etc/imagectl/expect.json: a replay without --expect uses it
            "expect_file": e,
            "hygiene": {
                "root": "/",
                "booted_root": True,
                "first_boot": T_FIRST_BOOT,
                "machine_id": "5b0c6a1f0e2d4c3b8a7968574a3b2c1d",
                "ssh_host_keys": [
                    {
                        "path": "/etc/ssh/ssh_host_ed25519_key",
                        "size": 399,
                        "mtime": T_FIRST_BOOT + 12.0,
                    },
                ],
                "build_keys": [],
                "credentials": [],
                "shell_history": [],
            },
        },
        "kernel_log": {"source": "journalctl -k -b", "error": None, "filtered": True, "text": log},
    }


# -- faults ---------------------------------------------------------------------------

Snap = dict[str, Any]


def _gpus(s: Snap) -> list[dict[str, Any]]:
    devices: list[dict[str, Any]] = s["nvml"]["devices"]
    return devices


def _log(s: Snap, line: str) -> None:
    s["kernel_log"]["text"] += f"2026-11-20T10:03:00+0000 host kernel: {line}\n"


def _bus(s: Snap, i: int) -> str:
    return str(_gpus(s)[i]["nvmlDeviceGetPciInfo_v3"]["busId"])[4:14].lower()


def xid(code: int, text: str, gpu: int = 3, times: int = 1) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        for _ in range(times):
            _log(s, f"NVRM: Xid (PCI:{_bus(s, gpu)}): {code}, pid=4242, name=python3, {text}")

    return apply


def gpu_set(
    func: str, value: Any, gpu: int | None = 0, key: str | None = None
) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        for i, dev in enumerate(_gpus(s)):
            if gpu is None or i == gpu:
                if key is None:
                    dev[func] = copy.deepcopy(value)
                else:
                    dev[func][key] = copy.deepcopy(value)

    return apply


def host_set(path: str, value: Any) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        node = s["host"]
        *head, last = path.split(".")
        for k in head:
            node = node[k]
        node[last] = copy.deepcopy(value)

    return apply


def both(*fns: Callable[[Snap], None]) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        for fn in fns:
            fn(s)

    return apply


def drop_gpu(index: int) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        del _gpus(s)[index]
        s["nvml"]["system"]["nvmlDeviceGetCount"] = len(_gpus(s))

    return apply


def drop_calls(*names: str) -> Callable[[Snap], None]:
    """An older driver: these functions do not exist (FUNCTION_NOT_FOUND when called)."""

    def apply(s: Snap) -> None:
        for dev in _gpus(s):
            for name in names:
                dev.pop(name, None)

    return apply


def nvml_init_error(name: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        s["nvml"] = {"init": {"error": name}, "system": {}, "devices": []}

    return apply


OLD = "580.82.07"
U, V, A = UNCORRECTED, VOLATILE, AGGREGATE
FM = "nvidia-fabricmanager-580"

# name -> (bases, apply, expected failures {check id: action}); ids not listed must pass,
# except checks failing only because NVML is unavailable (root cause nvml.init).
FAULTS: dict[str, tuple[tuple[str, ...], Callable[[Snap], None], dict[str, str]]] = {
    "xid79-fallen-off-bus": (
        ("h100-sxm-8x", "h200-8x"),
        xid(79, "GPU has fallen off the bus."),
        {"kernel.xid": "REBOOT"},
    ),
    "xid48-row-remap-pending": (
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
    ),
    "row-remap-failure": (
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        gpu_set("nvmlDeviceGetRemappedRows", [3, 512, 0, 1], gpu=5),
        {"gpu.row_remap.failure": "ISOLATE_RMA"},
    ),
    "row-remap-uncorrectable-over-512": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetRemappedRows", [0, 600, 0, 0], gpu=1),
        {"gpu.row_remap.uncorrectable": "ISOLATE_RMA"},
    ),
    "ecc-volatile-uncorrected": (
        ("h100-sxm-8x",),
        both(
            gpu_set("nvmlDeviceGetTotalEccErrors", 2, gpu=4, key=f"{U},{V}"),
            gpu_set("nvmlDeviceGetTotalEccErrors", 2, gpu=4, key=f"{U},{A}"),
        ),
        {"gpu.ecc.volatile_uncorrected": "RESET_GPU"},
    ),
    "ecc-sram-uncorrectable": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetMemoryErrorCounter", 1, gpu=6, key=f"{U},{A},{SRAM}"),
        {"gpu.ecc.sram": "ISOLATE_RMA"},
    ),
    "ecc-disabled": (
        ("h100-sxm-8x", "l4-1x"),
        both(gpu_set("nvmlDeviceGetCurrentEccMode", 0), gpu_set("nvmlDeviceGetPendingEccMode", 0)),
        {"gpu.ecc.mode": "REBOOT"},
    ),
    "ecc-pending-mode-change": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetPendingEccMode", 0, gpu=2),
        {"gpu.ecc.pending": "REBOOT"},
    ),
    "hw-slowdown": (
        ("h100-sxm-8x", "l4-1x"),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x8),
        {"gpu.clocks.events": "DRAIN"},
    ),
    "hw-thermal-slowdown": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x40 | 0x20),
        {"gpu.clocks.events": "DRAIN"},
    ),
    "hw-power-brake": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x80),
        {"gpu.clocks.events": "DRAIN"},
    ),
    "temperature-over-slowdown": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetTemperature", 90, gpu=7, key="0"),
        {"gpu.temperature": "DRAIN"},
    ),
    "pcie-gen3-x8": (
        ("h100-sxm-8x",),
        both(
            gpu_set("nvmlDeviceGetMaxPcieLinkGeneration", 3, gpu=2),
            gpu_set("nvmlDeviceGetMaxPcieLinkWidth", 8, gpu=2),
            gpu_set("nvmlDeviceGetCurrPcieLinkGeneration", 3, gpu=2),
            gpu_set("nvmlDeviceGetCurrPcieLinkWidth", 8, gpu=2),
        ),
        {"gpu.pcie.link_max": "DRAIN"},
    ),
    "gpu-missing-7-of-8": (("h100-sxm-8x",), drop_gpu(7), {"gpu.count": "REBOOT"}),
    "nvlink-inactive": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetNvLinkState", 0, gpu=2, key="5"),
        {"gpu.nvlink.active": "RESET_GPU"},
    ),
    "nvlink-crc-errors": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetNvLinkErrorCounter", 150, gpu=1, key="4,2"),
        {"gpu.nvlink.errors": "RESET_GPU"},
    ),
    "fabric-manager-not-running": (
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
        ),
        {"sw.fabricmanager.active": "REBOOT", "gpu.fabric.state": "REBOOT"},
    ),
    "fabric-manager-version-mismatch": (
        ("h100-sxm-8x",),
        host_set(f"packages.{FM}", {"version": f"{OLD}-1", "held": True, "installed": True}),
        {
            "sw.fabricmanager.version": "BLOCK_IMAGE",
            "sw.packages.pinned": "BLOCK_IMAGE",
            "sw.manifest.agrees": "BLOCK_IMAGE",
        },
    ),
    "fabric-state-in-progress": (
        ("h100-sxm-8x",),
        gpu_set(
            "nvmlDeviceGetGpuFabricInfoV",
            {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 0, "state": 2, "healthMask": 0},
            gpu=4,
        ),
        {"gpu.fabric.state": "REBOOT"},
    ),
    "persistence-off": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetPersistenceMode", 0, gpu=None),
        {"gpu.persistence_mode": "BLOCK_IMAGE"},
    ),
    "driver-library-mismatch": (
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
    ),
    "nvml-library-missing": (
        ("h100-sxm-8x",),
        both(
            nvml_init_error("LIBRARY_NOT_FOUND"),
            host_set("nvml_library", {"path": None, "version": None}),
        ),
        {"nvml.init": "BLOCK_IMAGE"},
    ),
    "driver-not-loaded": (
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
    ),
    "wrong-driver-version": (
        ("h100-sxm-8x",),
        both(
            lambda s: s["nvml"]["system"].update(nvmlSystemGetDriverVersion=OLD),
            host_set("nvidia_module.version", OLD),
            host_set("nvml_library.version", OLD),
        ),
        {"sw.driver.version": "BLOCK_IMAGE", "sw.fabricmanager.version": "BLOCK_IMAGE"},
    ),
    "mig-enabled": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetMigMode", [1, 1], gpu=0),
        {"gpu.mig_mode": "RESET_GPU"},
    ),
    "nccl-unpinned": (
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
    ),
    "kernel-not-pinned": (
        ("h100-sxm-8x",),
        host_set("kernel_release", "6.8.0-1040-aws"),
        {"sw.kernel.release": "BLOCK_IMAGE"},
    ),
    "proprietary-modules": (
        ("h100-sxm-8x",),
        host_set("nvidia_module.flavour", "proprietary"),
        {"sw.kernel.module_flavour": "BLOCK_IMAGE"},
    ),
    "inforom-corrupt": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceValidateInforom", {"$error": "CORRUPTED_INFOROM"}, gpu=6),
        {"gpu.inforom": "ISOLATE_RMA"},
    ),
    "recovery-action-reboot": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetFieldValues", 2, gpu=0, key=str(FIELD_RECOVERY_ACTION)),
        {"gpu.recovery_action": "REBOOT"},
    ),
    "xid64-repeated": (
        ("h100-sxm-8x",),
        xid(64, "Row remapper error.", times=2),
        {"kernel.xid": "ISOLATE_RMA"},
    ),
    "xid154-drain-and-reset": (
        ("h100-sxm-8x",),
        xid(154, "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)"),
        {"kernel.xid": "DRAIN"},
    ),
    "sxid-fatal": (
        ("h100-sxm-8x",),
        lambda s: _log(
            s, "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 12 LTSSM Fault Up"
        ),
        {"kernel.sxid": "DRAIN"},
    ),
    "ssh-host-keys-baked": (
        ("h100-sxm-8x",),
        host_set(
            "hygiene.ssh_host_keys",
            [{"path": "/etc/ssh/ssh_host_rsa_key", "size": 2602, "mtime": T_FIRST_BOOT - 86400}],
        ),
        {"image.ssh_host_keys": "BLOCK_IMAGE"},
    ),
    "cloud-credentials": (
        ("h100-sxm-8x",),
        host_set(
            "hygiene.credentials",
            [{"path": "/root/.aws/credentials", "size": 116, "mtime": T_FIRST_BOOT - 3600}],
        ),
        {"image.credentials": "BLOCK_IMAGE"},
    ),
    "shell-history-baked": (
        ("h100-sxm-8x",),
        host_set(
            "hygiene.shell_history",
            [{"path": "/root/.bash_history", "size": 2048, "mtime": T_FIRST_BOOT - 600}],
        ),
        {"image.shell_history": "BLOCK_IMAGE"},
    ),
    "memory-missing": (
        ("h100-sxm-8x",),
        gpu_set(
            "nvmlDeviceGetMemoryInfo",
            {"total": 40 * 2**30, "free": 39 * 2**30, "used": 2**30},
            gpu=3,
        ),
        {"gpu.memory": "ISOLATE_RMA"},
    ),
    "power-capped": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetEnforcedPowerLimit", 500_000, gpu=2),
        {"gpu.power.limit": "REBOOT"},
    ),
    # ignorable: these must pass
    "old-driver-without-newer-calls": (
        ("h100-sxm-8x",),
        drop_calls(
            "nvmlDeviceGetGpuFabricInfoV",
            "nvmlDeviceGetFieldValues",
            "nvmlDeviceGetMemoryErrorCounter",
            "nvmlDeviceGetRemappedRows",
        ),
        {},
    ),
    "xid63-row-remap-event": (
        ("h100-sxm-8x",),
        xid(63, "Row Remapper: New row marked for remapping, reset gpu to activate."),
        {},
    ),
    "xid92-high-sbe-rate": (("h100-sxm-8x",), xid(92, "High single-bit ECC error rate."), {}),
    "sw-power-cap": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x4, gpu=None),
        {},
    ),
    "idle-clocks": (
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        gpu_set("nvmlDeviceGetCurrentClocksEventReasons", 0x1, gpu=None),
        {},
    ),
    "idle-pcie-downtrained": (
        ("h100-sxm-8x",),
        gpu_set("nvmlDeviceGetCurrPcieLinkGeneration", 1, gpu=None),
        {},
    ),
}


def factored(snap: Snap) -> Snap:
    snap["nvml"] = factor_common(snap["nvml"])
    return snap


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    out = parser.parse_args().out
    cases: dict[str, Any] = {}
    for base in BASES:
        write(out / "expect" / f"{base}.json", expectations(base))
        write(out / "healthy" / f"{base}.json", factored(healthy(base)))
        cases[f"healthy/{base}.json"] = {"base": base, "fault": None, "expect_fail": {}}
    for fault, (bases, apply, expected) in FAULTS.items():
        for base in bases:
            snap = healthy(base)
            apply(snap)
            snap["description"] = f"{base} with one fault: {fault}"
            name = f"faults/{base}--{fault}.json"
            write(out / name, factored(snap))
            cases[name] = {"base": base, "fault": fault, "expect_fail": expected}
    write(out / "cases.json", cases)
    print(f"{len(cases)} snapshots under {out}")


if __name__ == "__main__":
    main()
