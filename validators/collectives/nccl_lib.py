"""Which NCCL runs: the image's pinned system library versus the one torch bundles.

torch wheels link NCCL dynamically from the ``nvidia-nccl-cu12`` wheel (RPATH), so a
collective through torch exercises that copy, not the image's ``libnccl2``. Preloading the
system ``libnccl.so.2`` (``LD_PRELOAD``) makes the dynamic linker bind torch's NCCL symbols
to the image's library; the worker then reports ``torch.cuda.nccl.version()``, which is
``ncclGetVersion`` of the library actually bound.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from importlib import metadata

SEARCH_PATHS = (
    "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
    "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
    "/usr/lib/sbsa-linux-gnu/libnccl.so.2",
    "/usr/local/cuda/lib64/libnccl.so.2",
    "/usr/lib64/libnccl.so.2",
)


def pinned_version(pin: str | None) -> str | None:
    """``2.26.2-1+cuda12.8`` -> ``2.26.2`` (the package pin's upstream version)."""
    if not pin:
        return None
    match = re.match(r"(\d+\.\d+\.\d+)", pin)
    return match.group(1) if match else None


def decode_version(code: int) -> str:
    """ncclGetVersion's integer: major*10000 + minor*100 + patch since NCCL 2.9, else *1000."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def find_system_library() -> str | None:
    try:
        out = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        for line in out.splitlines():
            if "libnccl.so.2" in line and "=>" in line:
                return line.split("=>", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    for path in SEARCH_PATHS:
        try:
            with open(path, "rb"):
                return path
        except OSError:
            continue
    return None


def library_version(path: str) -> str | None:
    """ncclGetVersion of the library at ``path`` (needs no GPU)."""
    try:
        lib = ctypes.CDLL(path)
        code = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:
            return None
        return decode_version(code.value)
    except (OSError, AttributeError):
        return None


def bundled_version() -> str | None:
    """Version of the NCCL wheel torch depends on, if installed (CUDA builds of torch)."""
    for dist in ("nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None
