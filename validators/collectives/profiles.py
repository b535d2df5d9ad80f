"""Sweeps, iteration counts and timeouts per device and profile (quick | full | burn).

GPU sweeps follow nccl-tests (``-b 1K -e 1G -f 4`` for quick); full reaches 16 GiB for
all_reduce, the size AzHC gates at. CPU sweeps stay at a few MiB: gloo on a small machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagectl.core.errors import UserError
from imagectl.validators.collectives.arithmetic import size_sweep

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Sweep:
    min_bytes: int
    max_bytes: int
    factor: int
    warmup: int
    iters: int
    join_timeout_s: float
    op_timeout_s: float
    all_reduce_max_bytes: int | None = None

    def sizes(self, op: str) -> list[int]:
        top = self.all_reduce_max_bytes if op == "all_reduce" and self.all_reduce_max_bytes else 0
        return size_sweep(self.min_bytes, max(self.max_bytes, top), self.factor)


SWEEPS = {
    ("cpu", "quick"): Sweep(1 * KiB, 1 * MiB, 4, 1, 3, 60, 60),
    ("cpu", "full"): Sweep(1 * KiB, 16 * MiB, 4, 2, 10, 60, 120),
    ("cpu", "burn"): Sweep(1 * KiB, 64 * MiB, 2, 5, 50, 60, 300),
    ("cuda", "quick"): Sweep(1 * KiB, 1 * GiB, 4, 5, 20, 120, 120),
    ("cuda", "full"): Sweep(1 * KiB, 4 * GiB, 2, 5, 20, 120, 300, all_reduce_max_bytes=16 * GiB),
    ("cuda", "burn"): Sweep(1 * KiB, 4 * GiB, 2, 20, 200, 120, 600, all_reduce_max_bytes=16 * GiB),
}


def sweep_for(device: str, profile: str) -> Sweep:
    try:
        return SWEEPS[(device, profile)]
    except KeyError:
        raise UserError(
            f"unknown validation profile {profile!r} for device {device!r}",
            hint="Use one of quick, full, burn",
        ) from None
