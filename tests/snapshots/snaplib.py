"""Building blocks of the snapshot library: the healthy bases and the fault primitives.

``make_snapshots.py`` (the generator) and the fault-class modules beside it
(``faults_*.py``, one per class of fault, each ``FAULTS: dict[str, Fault]``) import this.
"""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from niclib import fabric_for  # noqa: E402

from imagectl.stacks.expectations import from_stack  # noqa: E402
from imagectl.validators.expectations import shape_fields  # noqa: E402
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

__all__ = ["AGGREGATE", "FIELD_RECOVERY_ACTION", "SRAM", "factor_common"]  # re-exported

DRIVER = "580.95.05"
T_FIRST_BOOT = 1_790_000_000.0  # first boot of the instance (epoch seconds)
T_BOOT = T_FIRST_BOOT + 3600.0

# Each GPU board's NVML facts, shared by every base built on it: one row a fact, one column
# a board (H100 SXM 80GB, A100 SXM4 80GB, H200, L4, H100 NVL as one NC40ads H100 v5 has it)
_BOARD_FACTS: dict[str, tuple[Any, Any, Any, Any, Any]] = {
    "name": (
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H200",
        "NVIDIA L4",
        "NVIDIA H100 NVL",
    ),
    "count": (8, 8, 8, 1, 1),
    "mem_mib": (81559, 81920, 143771, 23034, 95330),
    "arch": (9, 7, 9, 8, 9),
    "pcie": ((5, 16), (4, 16), (5, 16), (4, 16), (5, 16)),
    "links": (18, 12, 18, 0, 0),
    "power_w": (700, 400, 700, 72, 400),
    "slowdown": (89, 92, 89, 94, 89),
    "shutdown": (92, 95, 92, 101, 92),
    "gpu_max": (87, 90, 87, 89, 87),
    "vbios": (
        "96.00.89.00.01",
        "92.00.45.00.06",
        "96.00.A5.00.01",
        "95.04.29.00.06",
        "96.00.99.00.01",
    ),
    "inforom": (
        "G520.0200.00.05",
        "G506.0212.00.02",
        "G525.0201.00.01",
        "G193.0200.00.01",
        "G520.0210.00.06",
    ),
    "nvswitch": (True, True, True, False, False),
}
H100_SXM_8X, A100_SXM_80GB_8X, H200_8X, L4_1X, H100_NVL_1X = (
    {fact: column[board] for fact, column in _BOARD_FACTS.items()} for board in range(5)
)

# The GPUs' PCI bus numbers on an HGX H100, H200 and A100 baseboard (each base gets its copy)
H100_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
H200_BUSES = ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")
A100_BUSES = ("10", "16", "20", "27", "90", "96", "a0", "a7")
# The GPUs' PCI domains on Azure's ND H100 v5 and NDm A100 v4 (Hyper-V vPCI: every device in
# its own domain), as Azure/azhpc-images topology/ndv5-topo.xml and ndv4-topo.xml list them
NDV5_DOMAINS = (0x1, 0x2, 0x3, 0x8, 0x9, 0xA, 0xB, 0xC)
NDV4_DOMAINS = (0x3, 0x4, 0x1, 0x2, 0xD, 0xE, 0xB, 0xC)


def _base(
    shape: str,
    board: dict[str, Any],
    image: str,
    buses: Sequence[str],
    cloud: str | None = None,
    domains: Sequence[int] = (),
    fabric: str | None = None,
) -> dict[str, Any]:
    """One healthy base: a shape, its board's facts, its image and its GPUs' buses; ``cloud``
    (absent: aws), ``domains`` (PCI domain per GPU, absent: 0) and ``fabric`` (niclib) only
    where given."""
    return {
        "shape": shape,
        **({"cloud": cloud} if cloud else {}),
        **board,
        "image": image,
        "buses": list(buses),
        **({"domains": list(domains)} if domains else {}),
        **({"fabric": fabric} if fabric else {}),
    }


def _azure(
    shape: str, board: dict[str, Any], gpu: str, domains: Sequence[int], fabric: str
) -> dict[str, Any]:
    """An Azure base: every GPU in its own PCI domain, on bus 00 (Hyper-V vPCI)."""
    image = f"/subscriptions/0000/images/{gpu}-training-healthy"
    buses = ["00"] * len(domains)
    return _base(shape, board, image, buses, cloud="azure", domains=domains, fabric=fabric)


BASES: dict[str, dict[str, Any]] = {
    "h100-sxm-8x": _base("p5.48xlarge", H100_SXM_8X, "ami-0h100healthy0001", H100_BUSES),
    "a100-sxm-80gb-8x": _base(
        "p4de.24xlarge", A100_SXM_80GB_8X, "ami-0a100healthy0001", A100_BUSES
    ),
    "h200-8x": _base("p5e.48xlarge", H200_8X, "ami-0h200healthy0001", H200_BUSES),
    "l4-1x": _base("g6.xlarge", L4_1X, "ami-0l4healthy000001", ["31"]),
    # p5.48xlarge with its NICs: 32 EFA devices, 4 behind each GPU's PCIe switch (niclib)
    "h100-p5-efa": _base(
        "p5.48xlarge", H100_SXM_8X, "ami-0h100efahealthy1", H100_BUSES, fabric="efa"
    ),
    # ND H100 v5 with its NICs: 8 NDR HCAs, one per GPU (niclib)
    "h100-ndv5-ib": _azure(
        "Standard_ND96isr_H100_v5", H100_SXM_8X, "h100", NDV5_DOMAINS, "infiniband"
    ),
    # NDm A100 v4 with its NICs: 8 HDR HCAs; two GPUs and two HCAs per virtual switch
    "a100-ndv4-ib": _azure(
        "Standard_ND96amsr_A100_v4", A100_SXM_80GB_8X, "a100", NDV4_DOMAINS, "infiniband-ndv4"
    ),
    # p5en.48xlarge with its NICs: 16 EFA (EFAv3), two behind each GPU's PCIe switch
    "h200-p5en-efa": _base(
        "p5en.48xlarge", H200_8X, "ami-0h200p5enhealthy", H200_BUSES, fabric="efa-p5en"
    ),
    # NC40ads H100 v5: one H100 NVL, no NVSwitch; the image is the training stack's Azure
    # image, which pins fabric manager for the stack's NVSwitch shapes (kept: the pin alone
    # must not make a one-GPU host need it)
    "h100nvl-1x-fm-pinned": {
        **_base(
            "Standard_NC40ads_H100_v5",
            H100_NVL_1X,
            "/subscriptions/0000/images/h100-training-healthy",
            ["00"],
            cloud="azure",
            domains=(0x1,),
        ),
        "keep_fm": True,
    },
    # a3-ultragpu-8g: GPUDirect RDMA over RoCE, 8 ConnectX-7 (one behind each GPU's switch),
    # NCCL over Google's gIB plugin, and two gVNICs for other traffic
    "h200-a3ultra-roce": _base(
        "a3-ultragpu-8g",
        H200_8X,
        "projects/imagectl/global/images/h200-training-healthy",
        H200_BUSES,
        cloud="gcp",
        fabric="roce",
    ),
    # a3-highgpu-8g: GPUDirect-TCPX over 4 gVNIC GPU NICs (two GPUs and one NIC behind each
    # of four PCIe switches) plus the primary gVNIC
    "h100-a3high-tcpx": _base(
        "a3-highgpu-8g",
        H100_SXM_8X,
        "projects/imagectl/global/images/h100-training-healthy",
        H100_BUSES,
        cloud="gcp",
        fabric="tcpx",
    ),
    # a3-megagpu-8g: GPUDirect-TCPXO over 8 gVNIC GPU NICs (one behind each GPU's switch)
    # plus the primary gVNIC
    "h100-a3mega-tcpxo": _base(
        "a3-megagpu-8g",
        H100_SXM_8X,
        "projects/imagectl/global/images/h100-training-healthy",
        H100_BUSES,
        cloud="gcp",
        fabric="gvnic",
    ),
}


def expectations(base: str) -> dict[str, Any]:
    return copy.deepcopy(_expectations(base))


@functools.cache
def _expectations(base: str) -> dict[str, Any]:
    b = BASES[base]
    e = from_stack(ROOT / "images", "h100-training", "p5.48xlarge")
    if b.get("cloud") in ("azure", "gcp"):  # that cloud's image: its kernel and fabric software
        e = from_stack(ROOT / "images", "h100-training", b["shape"])
    elif b["shape"] != "p5.48xlarge":
        e = e.model_copy(update=shape_fields(ROOT / "images", b["shape"]))
    if not b["nvswitch"] and not b.get("keep_fm"):
        pkgs = {k: v for k, v in e.packages.items() if not k.startswith("nvidia-fabricmanager")}
        e = e.model_copy(update={"fabric_manager": None, "packages": pkgs, "held": sorted(pkgs)})
    e = e.model_copy(update={"origin": f"tests/snapshots/expect/{base}.json"})
    return e.model_dump(mode="json")


# nvmlRowRemapperHistogramValues_t of a GPU whose banks all have every spare row
HISTOGRAM = {"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0}

# nvmlGpuFabricInfo_v2_t.healthMask of a healthy Hopper GPU: DEGRADED_BW, ROUTE_RECOVERY,
# ROUTE_UNHEALTHY and ACCESS_TIMEOUT_RECOVERY FALSE (2), INCORRECT_CONFIGURATION NONE (1)
HEALTHY_FABRIC_MASK = (2 << 0) | (2 << 2) | (2 << 4) | (2 << 6) | (1 << 8)


def fabric_mask(**fields: int) -> int:
    """The healthy mask with some fields set (names of nvml.h's SHIFT_* constants)."""
    shifts = {
        "DEGRADED_BW": (0, 0x3),
        "ROUTE_RECOVERY": (2, 0x3),
        "ROUTE_UNHEALTHY": (4, 0x3),
        "ACCESS_TIMEOUT_RECOVERY": (6, 0x3),
        "INCORRECT_CONFIGURATION": (8, 0xF),
        "PARTITION_ASSIGNED": (12, 0x3),
        "GFM_STATE": (14, 0x3),
    }
    mask = HEALTHY_FABRIC_MASK
    for name, value in fields.items():
        shift, width = shifts[name]
        mask = (mask & ~(width << shift)) | (value << shift)
    return mask


def _device(b: dict[str, Any], i: int) -> dict[str, Any]:
    gen, width = b["pcie"]
    bus = b["buses"][i]
    domain = b["domains"][i] if "domains" in b else 0
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
            "busIdLegacy": f"{domain:04X}:{bus.upper()}:00.0",
            "domain": domain,
            "bus": int(bus, 16),
            "device": 0,
            "pciDeviceId": 0x233010DE,
            "pciSubSystemId": 0x16C110DE,
            "busId": f"{domain:08X}:{bus.upper()}:00.0",
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
        # every bank with all its spare rows (nvmlRowRemapperHistogramValues_t), Ampere+
        **({"nvmlDeviceGetRowRemapperHistogram": dict(HISTOGRAM)} if b["arch"] >= 7 else {}),
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
    if links and b["arch"] >= 9:  # NVML: fabric info "for Hopper or newer"
        # v1 layout (deprecated call) and v2 (with the health mask); every field of the
        # mask reports healthy: FALSE for the fault bits, configuration NONE (nvml.h)
        fabric = {"clusterUuid": [0] * 16, "status": 0, "cliqueId": 32766, "state": 3}
        dev["nvmlDeviceGetGpuFabricInfo"] = dict(fabric)
        dev["nvmlDeviceGetGpuFabricInfoV"] = {**fabric, "healthMask": HEALTHY_FABRIC_MASK}
    else:
        dev["nvmlDeviceGetGpuFabricInfo"] = {"$error": "NOT_SUPPORTED"}
        dev["nvmlDeviceGetGpuFabricInfoV"] = {"$error": "NOT_SUPPORTED"}
    if not links:
        dev["nvmlDeviceGetNvLinkState"] = {"$error": "NOT_SUPPORTED"}
        dev["nvmlDeviceGetNvLinkErrorCounter"] = {"$error": "NOT_SUPPORTED"}
    return dev


def healthy(base: str) -> dict[str, Any]:
    b = BASES[base]
    e = expectations(base)
    # the stack's pins (fabric manager and CUDA with their Debian revision) and the driver's
    versions = {
        name: f"{v}-1" if name.startswith(("nvidia-fabricmanager", "cuda-toolkit")) else v
        for name, v in e["packages"].items()
    }
    versions["nvidia-driver-580-open"] = versions["libnvidia-compute-580"] = f"{DRIVER}-0ubuntu1"
    packages = {
        name: {"version": version, "held": True, "installed": True}
        for name, version in versions.items()
    }
    extra = {"fabric": fabric_for(b["fabric"], b["buses"])} if "fabric" in b else {}
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
                "schema_version": 2,
                "image_id": b["image"],
                "stack": e["stack"],
                "stack_digest": e["stack_digest"],
                "kernel": e["kernel"],
                "kernel_modules": e["kernel_modules"],
                # as write-manifest.py records them: the module's own driver version,
                # ncclGetVersion, and each component's installed Debian version
                "driver": e["driver"],
                "nccl": e["nccl"].split("-")[0] if e["nccl"] else None,
                **{
                    field: next(
                        (p["version"] for n, p in sorted(packages.items()) if n.startswith(pre)),
                        None,
                    )
                    for field, pre in (
                        ("fabric_manager", "nvidia-fabricmanager-"),
                        ("cuda", "cuda-toolkit-"),
                        ("dcgm", "datacenter-gpu-manager-4-cuda"),
                        ("container_toolkit", "nvidia-container-toolkit"),
                    )
                },
                "packages": {n: p["version"] for n, p in sorted(packages.items())},
            },
            "cloud_image": {"cloud": b.get("cloud", "aws"), "image_id": b["image"]},
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
        "cuda": cuda_ready(b["count"], e["validator_toolkit"]),
        **extra,
    }


def cuda_ready(count: int, toolkit: dict[str, str] | None) -> dict[str, Any]:
    """A host ready for the GPU work: the stack's toolkit installed, device nodes, nvidia_uvm
    loaded and cuInit succeeding in three fresh processes (readiness.gather())."""
    tk = toolkit or {"torch": "2.9.1", "cuda": "12.8", "variant": "cu128"}
    return {
        "toolkit": {
            "installed": True,
            "version": f"{tk['torch']}+{tk['variant']}",
            "cuda": tk["cuda"],
            "path": "/opt/imagectl/lib/python3.10/site-packages/torch",
        },
        "device_nodes": [f"/dev/nvidia{i}" for i in range(count)],
        "nvidiactl": True,
        "uvm": {"loaded": True, "node": True},
        "cuinit": [{"rc": 0, "ms": 412.5 + 3 * i, "devices": count} for i in range(3)],
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


@dataclass(frozen=True)
class Fault:
    """One named fault: the bases it is applied to, how, and what the validator must say.

    ``expect_fail``: check id -> action for every check that must fail (nothing else may
    fail; empty: the snapshot must pass). ``expect_warn``: check ids that must warn.
    ``source``: where the rule that judges it comes from (a vendor document, cited).
    ``expect``: fields of the base's expectations this case changes (e.g. ``mig_mode``);
    the case is then judged against its own ``expect/<base>--<fault>.json``.
    """

    bases: tuple[str, ...]
    apply: Callable[[Snap], None]
    expect_fail: dict[str, str]
    source: str
    expect_warn: tuple[str, ...] = ()
    profile: str = "boot"  # the profile the case is replayed with
    expect: dict[str, Any] | None = None


# -- kernel-log and XID primitives (fault classes 1-4, faults_kernel.py) ---------------


def log_line(line: str, stamp: str = "2026-11-20T10:03:00+0000") -> Callable[[Snap], None]:
    """One kernel-log line as ``journalctl -k -o short-iso`` prints it ("" stamp: as is)."""

    def apply(s: Snap) -> None:
        s["kernel_log"]["text"] += (f"{stamp} host kernel: {line}" if stamp else line) + "\n"

    return apply


def xid_lines(
    code: int,
    text: str,
    gpu: int = 3,
    pids: tuple[int, ...] = (4242,),
    name: str = "python3",
    mig: str = "",
    stamp: str = "2026-11-20T10:03:00+0000",
) -> Callable[[Snap], None]:
    """One ``NVRM: Xid`` line per pid (``mig``: "GPU-I:05 GPU-CI:00" inside the parentheses)."""

    def apply(s: Snap) -> None:
        where = f"{_bus(s, gpu)} {mig}".strip()
        for pid in pids:
            line = f"NVRM: Xid (PCI:{where}): {code}, pid={pid}, name={name}, {text}"
            log_line(line, stamp)(s)

    return apply


def previous_boot_xid(code: int, gpu: int, outcome: str = "fail") -> Callable[[Snap], None]:
    """The boot before this one: its receipt (as the fleet boot unit keeps it under
    /var/lib/imagectl/boots/) had XID ``code`` on this GPU (named by UUID)."""

    def apply(s: Snap) -> None:
        dev = _gpus(s)[gpu]
        uuid = str(dev["nvmlDeviceGetUUID"])
        receipt = {
            "kind": "imagectl.validation-receipt",
            "started_at": "2026-11-19T08:00:05+00:00",
            "host": {"boot": {"boot_id": "0a0b0c0d-1111-2222-3333-444455556666"}},
            "gpus": [{"index": gpu, "uuid": uuid, "bus": _bus(s, gpu)}],
            "checks": [
                {
                    "id": "kernel.xid",
                    "outcome": outcome,
                    "gpu": gpu,
                    "measured": {"code": code, "device": _bus(s, gpu), "count": 1},
                    "details": {"gpu_uuid": uuid},
                }
            ],
        }
        s["host"].setdefault("boot_history", []).append(receipt)

    return apply
