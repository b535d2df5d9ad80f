"""How long and how big the CUDA smoke tests run, per device and profile (quick|full|burn)."""

from __future__ import annotations

from dataclasses import dataclass

from imagectl.core.errors import UserError

MiB = 1 << 20


@dataclass(frozen=True)
class SmokeProfile:
    cuinit_tries: int  # fresh processes calling cuInit
    gemm_check_n: int  # square GEMM checked against the fp64 reference
    gemm_perf_n: int  # square GEMM timed for TFLOP/s
    gemm_iters: int
    copy_bytes: int  # device-to-device copy buffer
    host_copy_bytes: int  # pinned host <-> device buffer
    p2p_bytes: int
    copy_iters: int
    load_s: float  # GEMM load while NVML is sampled
    sample_interval_s: float = 0.25  # 4 Hz (the issue asks for 2 Hz or faster)


PROFILES = {
    ("cuda", "quick"): SmokeProfile(3, 2048, 8192, 20, 1024 * MiB, 256 * MiB, 256 * MiB, 10, 10.0),
    ("cuda", "full"): SmokeProfile(
        10, 4096, 8192, 100, 4096 * MiB, 1024 * MiB, 1024 * MiB, 20, 120.0
    ),
    ("cuda", "burn"): SmokeProfile(
        20, 4096, 8192, 500, 4096 * MiB, 1024 * MiB, 1024 * MiB, 50, 900.0
    ),
    ("cpu", "quick"): SmokeProfile(0, 128, 192, 2, 32 * MiB, 0, 0, 3, 1.0),
    ("cpu", "full"): SmokeProfile(0, 256, 512, 5, 64 * MiB, 0, 0, 5, 3.0),
    ("cpu", "burn"): SmokeProfile(0, 256, 1024, 20, 256 * MiB, 0, 0, 20, 30.0),
}


def profile_for(device: str, profile: str) -> SmokeProfile:
    try:
        return PROFILES[(device, profile)]
    except KeyError:
        raise UserError(
            f"unknown validation profile {profile!r} for device {device!r}",
            hint="Use one of quick, full, burn",
        ) from None
