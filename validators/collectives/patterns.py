"""Input patterns and expected results for the five collectives.

Every value is a small integer held in float32, so sums are exact in any reduction order
and every rank can check its whole result bit for bit (nccl-tests checks every rank too).
A misplaced chunk, a missing contribution or a corrupted element all change the values.

Values are functions of the global element index, generated and checked in chunks of
``CHUNK`` elements, so a 16 GiB all_reduce needs no index tensor of 16 G entries.
``torch`` is passed in: this module is only imported inside the worker process.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor
    from torch import device as TorchDevice

CHUNK = 1 << 26  # elements per generation / comparison step (512 MiB of int64 indices)

Fn = Callable[["Tensor"], "Tensor"]  # global index tensor (int64) -> values


def _send_fn(op: str, rank: int, n: int, m: int) -> Fn:
    if op == "all_reduce":
        return lambda i: i % 7 + (rank + 1)
    if op == "all_gather":
        return lambda k: k % 8 + rank * 8
    if op == "reduce_scatter":
        return lambda j: j % 5 + (rank + 1)
    if op == "broadcast":
        return (lambda i: i % 11 + 3) if rank == 0 else (lambda i: i * 0 - 1)
    if op == "all_to_all":  # element i goes to rank i // m
        return lambda i: rank * n + i // m + n * n * (i % m % 3)
    raise ValueError(f"unknown collective {op!r}")


def _expect_fn(op: str, rank: int, n: int, m: int) -> Fn:
    total = n * (n + 1) // 2
    if op == "all_reduce":
        return lambda i: n * (i % 7) + total
    if op == "all_gather":  # chunk r came from rank r
        return lambda i: i % m % 8 + i // m * 8
    if op == "reduce_scatter":  # this rank keeps chunk ``rank`` of the reduction
        return lambda k: n * ((k + rank * m) % 5) + total
    if op == "broadcast":
        return lambda i: i % 11 + 3
    if op == "all_to_all":  # chunk q came from rank q
        return lambda i: i // m * n + rank + n * n * (i % m % 3)
    raise ValueError(f"unknown collective {op!r}")


def send_length(op: str, count: int, n: int) -> int:
    return count // n if op == "all_gather" else count


def recv_length(op: str, count: int, n: int) -> int:
    return count // n if op == "reduce_scatter" else count


def _fill(torch: ModuleType, out: Tensor, fn: Fn) -> Tensor:
    for start in range(0, out.numel(), CHUNK):
        stop = min(start + CHUNK, out.numel())
        out[start:stop] = fn(torch.arange(start, stop, device=out.device)).float()
    return out


def inputs(
    torch: ModuleType, op: str, count: int, rank: int, n: int, device: TorchDevice
) -> Tensor:
    """The tensor ``rank`` sends for ``op`` (``count`` = total elements, a multiple of n)."""
    out = torch.empty(send_length(op, count, n), device=device)
    return _fill(torch, out, _send_fn(op, rank, n, count // n))


def expected(
    torch: ModuleType, op: str, count: int, rank: int, n: int, device: TorchDevice
) -> Tensor:
    """What ``rank`` must hold after ``op`` (materialised: for tests and small sizes)."""
    out = torch.empty(recv_length(op, count, n), device=device)
    return _fill(torch, out, _expect_fn(op, rank, n, count // n))


def output_buffer(
    torch: ModuleType, op: str, count: int, n: int, device: TorchDevice
) -> Tensor | None:
    """The receive buffer for ``op`` (all_reduce and broadcast work in place)."""
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return torch.empty(recv_length(op, count, n), device=device)
    return None


def check(
    torch: ModuleType, op: str, got: Tensor, count: int, rank: int, n: int
) -> dict[str, object] | None:
    """None when ``got`` is what ``rank`` must hold, else the mismatch count and first element."""
    fn = _expect_fn(op, rank, n, count // n)
    bad_total, first = 0, None
    for start in range(0, got.numel(), CHUNK):
        stop = min(start + CHUNK, got.numel())
        want = fn(torch.arange(start, stop, device=got.device)).float()
        bad = torch.nonzero(got[start:stop] != want)
        if bad.numel():
            bad_total += int(bad.shape[0])
            if first is None:
                k = int(bad[0, 0])
                first = {
                    "first_index": start + k,
                    "got": float(got[start + k]),
                    "expected": float(want[k]),
                }
    if not bad_total:
        return None
    return {"mismatches": bad_total, **(first or {})}
