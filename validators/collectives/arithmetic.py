"""nccl-tests bandwidth arithmetic and the size sweep.

Exactly as NVIDIA/nccl-tests (doc/PERFORMANCE.md, src/*.cu ``GetBw``): ``S`` is the
size column of nccl-tests in bytes, ``algbw = S / t`` with GB = 1e9 bytes, and
``busbw = algbw * factor``:

- all_reduce: 2(n-1)/n, S = the buffer each rank reduces;
- all_gather, reduce_scatter, all_to_all: (n-1)/n, S = the total size
  (count per rank x n);
- broadcast: 1, S = the broadcast buffer.

Counts are rounded as nccl-tests rounds them (see ``element_count``), so the reported bytes
are the bytes actually moved.
"""

from __future__ import annotations

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")

ELEMENT_BYTES = 4  # float32, nccl-tests' default data type


def bus_factor(op: str, nranks: int) -> float:
    """The busbw / algbw factor of nccl-tests for ``op`` over ``nranks`` ranks."""
    if nranks < 1:
        raise ValueError(f"rank count must be >= 1, got {nranks}")
    if op == "all_reduce":
        return 2.0 * (nranks - 1) / nranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (nranks - 1) / nranks
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 bytes)."""
    if time_s <= 0:
        raise ValueError(f"time must be positive, got {time_s}")
    return size_bytes / time_s / 1e9


def busbw_gbps(op: str, size_bytes: int, time_s: float, nranks: int) -> float:
    """Bus bandwidth in GB/s, nccl-tests' figure comparable with the hardware peak."""
    return algbw_gbps(size_bytes, time_s) * bus_factor(op, nranks)


ALIGN = 4  # elements: nccl-tests' per-rank alignment for all_gather / reduce_scatter / alltoall
CHUNKED = ("all_gather", "reduce_scatter", "all_to_all")


def element_count(size_bytes: int, nranks: int, op: str = "all_gather") -> int:
    """Total elements nccl-tests runs for a requested size (its ``*GetCollByteCount``).

    all_gather, reduce_scatter, all_to_all: the per-rank count is rounded down to a multiple
    of 4 elements (16 bytes for float), total = per-rank x n; all_reduce and broadcast run
    the requested count as is. Never below one aligned chunk per rank.
    """
    count = size_bytes // ELEMENT_BYTES
    if op in CHUNKED:
        per_rank = max(count // (ALIGN * nranks) * ALIGN, ALIGN)
        return per_rank * nranks
    return max(count, 1)


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` multiplying by ``factor`` (nccl-tests -b/-e/-f)."""
    if min_bytes <= 0 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"bad sweep: min={min_bytes} max={max_bytes} factor={factor}")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes
