"""Fault class: the host is not ready for a loaded profile's GPU work (replayed with quick).

The validator's toolkit missing or wrong, and CUDA not initialising, each for its reason.
Every one must end with BLOCK_IMAGE, never a pass on the CPU (validators/compute/readiness.py).
CUresult codes: CUDA Driver API reference, enum CUresult.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from snaplib import Fault, Snap

CUDA_RESULTS = "CUDA Driver API reference, enum CUresult; validators/data/cuda_init.yaml"


def cuda(**changes: Any) -> Callable[[Snap], None]:
    """Change the recorded readiness facts (the snapshot's ``cuda`` section)."""

    def apply(s: Snap) -> None:
        for key, value in changes.items():
            s["cuda"][key] = value

    return apply


def cuinit(rc: int | None, error: str | None = None) -> list[dict[str, Any]]:
    if rc is None:
        return [{"rc": None, "error": error} for _ in range(3)]
    return [{"rc": rc, "ms": 2.1, "devices": -1} for _ in range(3)]


NO_TORCH = {"installed": False, "error": "No module named 'torch'"}
CPU_TORCH = {
    "installed": True,
    "version": "2.9.1+cpu",
    "cuda": None,
    "path": "/opt/imagectl/lib/python3.10/site-packages/torch",
}
CU126 = {
    "installed": True,
    "version": "2.9.1+cu126",
    "cuda": "12.6",
    "path": "/opt/imagectl/lib/python3.10/site-packages/torch",
}
LIBCUDA = "libcuda.so.1: cannot open shared object file: No such file or directory"

FAULTS: dict[str, Fault] = {
    "toolkit-missing": Fault(
        ("h100-sxm-8x", "l4-1x"),
        cuda(toolkit=NO_TORCH),
        {"validator.toolkit": "BLOCK_IMAGE"},
        source="imagectl: a dependency the profile needs that is missing is an error with "
        "BLOCK_IMAGE, never a skip (the stack's validation.toolkit)",
        profile="quick",
    ),
    "toolkit-cpu-build": Fault(
        ("a100-sxm-80gb-8x",),
        cuda(toolkit=CPU_TORCH),
        {"validator.toolkit": "BLOCK_IMAGE"},
        source="PyTorch: a +cpu build reports torch.version.cuda = None and cannot run CUDA",
        profile="quick",
    ),
    "toolkit-wrong-variant": Fault(
        ("h100-sxm-8x",),
        cuda(toolkit=CU126),
        {"validator.toolkit": "BLOCK_IMAGE"},
        source="the stack's validation.toolkit pins torch 2.9.1 with CUDA 12.8 (cu128)",
        profile="quick",
    ),
    "cuda-uvm-missing": Fault(
        ("h100-sxm-8x", "a100-sxm-80gb-8x"),
        cuda(uvm={"loaded": False, "node": False}, cuinit=cuinit(999)),
        {"cuda.init": "BLOCK_IMAGE"},
        source=f"{CUDA_RESULTS}: CUDA_ERROR_UNKNOWN (999) with nvidia_uvm not loaded",
        profile="quick",
    ),
    "cuda-no-device-nodes": Fault(
        ("h200-8x", "l4-1x"),
        cuda(device_nodes=[], nvidiactl=False, cuinit=cuinit(100)),
        {"cuda.init": "BLOCK_IMAGE"},
        source=f"{CUDA_RESULTS}: CUDA_ERROR_NO_DEVICE (100); no /dev/nvidia* nodes",
        profile="quick",
    ),
    "cuda-driver-mismatch": Fault(
        ("h100-sxm-8x",),
        cuda(cuinit=cuinit(803)),
        {"cuda.init": "BLOCK_IMAGE"},
        source=f"{CUDA_RESULTS}: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)",
        profile="quick",
    ),
    "cuda-fabric-not-ready": Fault(
        ("h200-8x",),
        cuda(cuinit=cuinit(802)),
        {"cuda.init": "BLOCK_IMAGE"},
        source=f"{CUDA_RESULTS}: CUDA_ERROR_SYSTEM_NOT_READY (802): NVSwitch fabric not ready",
        profile="quick",
    ),
    "libcuda-missing": Fault(
        ("l4-1x",),
        cuda(cuinit=cuinit(None, LIBCUDA)),
        {"cuda.init": "BLOCK_IMAGE"},
        source="NVIDIA driver installation guide: libcuda.so.1 ships with the driver",
        profile="quick",
    ),
    "healthy-quick-replay": Fault(
        ("h100-sxm-8x", "l4-1x"),
        lambda s: None,
        {},
        source="a healthy host replayed with quick: readiness passes, measurements are not "
        "replayed (validation.coverage says so; the gate refuses replay receipts)",
        profile="quick",
    ),
}
