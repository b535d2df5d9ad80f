"""Input patterns and expected results for the five collectives.

Every value is a small integer held in float32, so sums are exact in any reduction order
and every rank can check its whole result bit for bit (nccl-tests checks every rank too).
A misplaced chunk, a missing contribution or a corrupted element all change the values.
``torch`` is passed in: this module is only imported inside the worker process.
"""

from __future__ import annotations

from typing import Any


def inputs(torch: Any, op: str, count: int, rank: int, n: int, device: Any) -> Any:
    """The tensor ``rank`` sends for ``op`` (``count`` = total elements, a multiple of n)."""
    m = count // n
    if op == "all_reduce":
        idx = torch.arange(count, device=device)
        return (idx % 7 + (rank + 1)).float()
    if op == "all_gather":
        idx = torch.arange(m, device=device)
        return (idx % 8 + rank * 8).float()
    if op == "reduce_scatter":
        idx = torch.arange(count, device=device)
        return (idx % 5 + (rank + 1)).float()
    if op == "broadcast":
        if rank == 0:
            idx = torch.arange(count, device=device)
            return (idx % 11 + 3).float()
        return torch.full((count,), -1.0, device=device)
    if op == "all_to_all":
        k = torch.arange(count, device=device) % m
        dest = torch.arange(count, device=device) // m
        return (rank * n + dest + n * n * (k % 3)).float()
    raise ValueError(f"unknown collective {op!r}")


def expected(torch: Any, op: str, count: int, rank: int, n: int, device: Any) -> Any:
    """What ``rank`` must hold after ``op`` when every rank sent ``inputs``."""
    m = count // n
    if op == "all_reduce":
        idx = torch.arange(count, device=device)
        return (n * (idx % 7) + n * (n + 1) // 2).float()
    if op == "all_gather":
        idx = torch.arange(count, device=device)
        return (idx % m % 8 + (idx // m) * 8).float()
    if op == "reduce_scatter":
        idx = torch.arange(m, device=device) + rank * m
        return (n * (idx % 5) + n * (n + 1) // 2).float()
    if op == "broadcast":
        idx = torch.arange(count, device=device)
        return (idx % 11 + 3).float()
    if op == "all_to_all":
        k = torch.arange(count, device=device) % m
        src = torch.arange(count, device=device) // m
        return (src * n + rank + n * n * (k % 3)).float()
    raise ValueError(f"unknown collective {op!r}")


def output_buffer(torch: Any, op: str, count: int, n: int, device: Any) -> Any:
    """The receive buffer for ``op`` (all_reduce and broadcast work in place)."""
    if op == "reduce_scatter":
        return torch.empty(count // n, device=device)
    if op in ("all_gather", "all_to_all"):
        return torch.empty(count, device=device)
    return None


def compare(torch: Any, got: Any, want: Any) -> dict[str, Any] | None:
    """None when equal, else the mismatch count and the first bad element."""
    bad = torch.nonzero(got != want)
    if bad.numel() == 0:
        return None
    first = int(bad[0, 0])
    return {
        "mismatches": int(bad.shape[0]),
        "first_index": first,
        "got": float(got[first]),
        "expected": float(want[first]),
    }
