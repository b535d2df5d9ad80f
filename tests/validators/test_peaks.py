"""Datasheet peaks (images/compat/gpus.yaml peaks): every GPU SKU has a sourced row, and the GPU
check's ratios are the receipt's figures over them."""

from __future__ import annotations

import json
from pathlib import Path

from imagectl.validators.compute.peaks import figures, peaks
from imagectl.validators.shapes import gpu_rows

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "snapshots" / "real"


def test_every_gpu_sku_has_a_sourced_peak_row() -> None:
    rows = peaks()
    for sku in gpu_rows(REPO / "images" / "compat"):
        assert sku in rows, f"{sku}: add its datasheet peaks to images/compat/gpus.yaml"
        row = rows[sku]
        assert set(row) == {"bf16_dense_tflops", "hbm_gbps", "source"}, sku
        assert row["source"] and (row["hbm_gbps"] or 0) > 0, sku
        if row["bf16_dense_tflops"] is None:
            assert "no" in row["source"], f"{sku}: say why there is no bf16 peak"


def test_the_real_runs_figures_are_their_receipts_over_the_peaks() -> None:
    """The committed figures of the real H200 and H100 runs, recomputed from the peaks."""
    for path in sorted(REAL.glob("*.figures.json")):
        recorded = json.loads(path.read_text())
        receipt = {
            "expectations": {"gpu": recorded["gpu"]},
            "checks": [
                {"id": "cuda.gemm.bf16", "measured": recorded["gemm_bf16_tflops"]},
                {"id": "cuda.hbm_bandwidth", "measured": recorded["hbm_copy_gbps"]},
            ],
        }
        got = figures(receipt)
        assert (
            got["gemm_ratio"] == recorded["gemm_ratio"]
            and got["hbm_ratio"] == recorded["hbm_ratio"]
        )
        assert 0.5 < got["gemm_ratio"] < 1 and 0.5 < got["hbm_ratio"] < 1, path.name
    cpu = figures(
        {"expectations": {"gpu": None}, "checks": [{"id": "cuda.gemm.bf16", "measured": 0.2}]}
    )
    assert cpu["gemm_ratio"] is None and cpu["gemm_bf16_tflops"] == 0.2  # no peak: no ratio
