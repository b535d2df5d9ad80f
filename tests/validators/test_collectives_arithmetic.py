"""nccl-tests bandwidth arithmetic, checked against hand-computed figures."""

from __future__ import annotations

import pytest

from imagectl.validators.collectives.arithmetic import (
    OPS,
    algbw_gbps,
    bus_factor,
    busbw_gbps,
    element_count,
    size_sweep,
)


def test_bus_factors_match_nccl_tests():
    # nccl-tests src/*.cu GetBw: all_reduce 2(n-1)/n; gather/scatter/alltoall (n-1)/n; bcast 1
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_reduce", 2) == pytest.approx(1.0)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_scatter", 3) == pytest.approx(2 / 3)
    assert bus_factor("all_to_all", 8) == pytest.approx(0.875)
    assert bus_factor("broadcast", 8) == 1.0
    assert set(OPS) == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"}
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("reduce", 2)


def test_all_reduce_8_gpus_figure_by_hand():
    # nccl-tests all_reduce_perf -g 8, 8 GiB out-of-place at 63896 us:
    # algbw = 8589934592 B / 0.063896 s / 1e9 = 134.437 GB/s; busbw = 134.437 * 14/8 = 235.26
    assert algbw_gbps(8589934592, 63896e-6) == pytest.approx(134.437, abs=1e-3)
    assert busbw_gbps("all_reduce", 8589934592, 63896e-6, 8) == pytest.approx(235.26, abs=1e-2)


def test_all_gather_uses_total_size():
    # 4 ranks, 64 MiB total (16 MiB each) in 1000 us: algbw 67.109 GB/s, busbw x 3/4 = 50.332
    assert busbw_gbps("all_gather", 64 << 20, 1e-3, 4) == pytest.approx(50.332, abs=1e-3)
    # broadcast: busbw == algbw; 1 MB in 1 ms is 1 GB/s
    assert busbw_gbps("broadcast", 1_000_000, 1e-3, 8) == pytest.approx(1.0)


def test_counts_are_rounded_as_nccl_tests_rounds_them():
    # all_gather / reduce_scatter / alltoall: per-rank count down to a multiple of 4 elements
    assert element_count(1024, 3, "all_gather") == 252  # 256 floats: 84 per rank (21 x 4)
    assert element_count(1024, 3, "reduce_scatter") == 252
    assert element_count(1000, 8, "all_to_all") == 224  # 250 floats: 28 per rank
    assert element_count(1024, 4, "all_gather") == 256
    assert element_count(4, 8, "all_gather") == 32  # never below one aligned chunk per rank
    # all_reduce and broadcast run the requested count as is
    assert element_count(1000, 3, "all_reduce") == 250
    assert element_count(1000, 3, "broadcast") == 250


def test_size_sweep_and_bad_input():
    assert size_sweep(1024, 16384, 4) == [1024, 4096, 16384]
    with pytest.raises(ValueError):
        size_sweep(0, 10)
    with pytest.raises(ValueError):
        algbw_gbps(10, 0)
