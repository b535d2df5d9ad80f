"""Copy bandwidths: device memory (device-to-device), pinned host<->device, and GPU pairs.

Counting (see floors.yaml): a device-to-device copy moves 2 x size bytes (read + write),
as DCGM's memory bandwidth test counts; host<->device and peer copies count size once, as
nvbandwidth does. GPU timings use CUDA events on the copying stream; peer copies use the
host clock around synchronised copies (two devices, one clock). GB = 1e9 bytes.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import device as TorchDevice


def _elapsed(torch: ModuleType, dev: TorchDevice, fn: Any, iters: int) -> float:
    fn()  # warm-up
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        # Events are recorded on the current stream of the current device: make it ``dev``'s.
        with torch.cuda.device(dev):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return time.perf_counter() - t0


def device_copy_gbps(torch: ModuleType, dev: TorchDevice, nbytes: int, iters: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(1)
    dst = torch.empty_like(src)
    seconds = _elapsed(torch, dev, lambda: dst.copy_(src), iters)
    return 2.0 * nbytes * iters / seconds / 1e9


def host_copy_gbps(
    torch: ModuleType, dev: TorchDevice, nbytes: int, iters: int, direction: str
) -> float:
    """Pinned host memory to the device (``h2d``) or back (``d2h``)."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(1)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    with torch.cuda.device(dev):
        if direction == "h2d":
            seconds = _elapsed(torch, dev, lambda: gpu.copy_(host, non_blocking=True), iters)
        else:
            seconds = _elapsed(torch, dev, lambda: host.copy_(gpu, non_blocking=True), iters)
    return nbytes * iters / seconds / 1e9


def peer_matrix(torch: ModuleType, count: int, nbytes: int, iters: int) -> list[dict[str, object]]:
    """One entry per ordered GPU pair: peer access, and the copy bandwidth src -> dst."""
    pairs = []
    bufs = [
        torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{i}").fill_(i) for i in range(count)
    ]
    for src in range(count):
        for dst in range(count):
            if src == dst:
                continue
            entry: dict[str, object] = {"src": src, "dst": dst}
            entry["peer_access"] = bool(torch.cuda.can_device_access_peer(src, dst))
            if entry["peer_access"]:
                target = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dst}")
                target.copy_(bufs[src])  # warm-up (enables peer mappings)
                torch.cuda.synchronize(src)
                torch.cuda.synchronize(dst)
                t0 = time.perf_counter()
                for _ in range(iters):
                    target.copy_(bufs[src])
                torch.cuda.synchronize(src)
                torch.cuda.synchronize(dst)
                entry["gbps"] = nbytes * iters / (time.perf_counter() - t0) / 1e9
                del target
            pairs.append(entry)
    return pairs
