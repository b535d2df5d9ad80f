"""Measured figures against the GPU's datasheet peaks (the GPU table's ``peaks``,
images/compat/gpus.yaml).

``python -m imagectl.validators.compute.peaks RECEIPT`` prints, as JSON, a receipt's bf16
GEMM TFLOP/s and HBM copy GB/s, the GPU's peaks and the ratios. The peaks explain a
figure; they never gate (the floors in ``floors.yaml`` do). The GPU check
(``benchmarks/gpu_check.py``) runs it with the bundle's interpreter.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import imagectl.images
from imagectl.validators.shapes import gpu_rows


@lru_cache(maxsize=1)
def peaks() -> dict[str, object]:
    """SKU -> its datasheet peaks (bf16_dense_tflops, hbm_gbps, source), from the GPU table."""
    rows = gpu_rows(Path(imagectl.images.__file__).resolve().parent / "compat")
    return {
        str(sku): dict(row["peaks"])
        for sku, row in rows.items()
        if isinstance(row, dict) and isinstance(row.get("peaks"), dict)
    }


def peaks_for(sku: str | None) -> dict[str, object]:
    """The SKU's row ({} for an unknown SKU or none: a CPU run)."""
    row = peaks().get(sku or "")
    return dict(row) if isinstance(row, dict) else {}


def _measured(receipt: dict[str, Any], check_id: str) -> float | None:
    for check in receipt.get("checks") or []:
        if check.get("id") == check_id and isinstance(check.get("measured"), (int, float)):
            return float(check["measured"])
    return None


def _ratio(value: float | None, peak: object) -> float | None:
    if value is None or not isinstance(peak, (int, float)) or not peak:
        return None
    return round(value / peak, 3)


def figures(receipt: dict[str, Any], gpu: str | None = None) -> dict[str, Any]:
    """The receipt's GEMM and HBM figures beside the peaks of its GPU (``gpu`` or the
    receipt's expectations)."""
    sku = gpu or (receipt.get("expectations") or {}).get("gpu")
    row = peaks_for(sku)
    gemm = _measured(receipt, "cuda.gemm.bf16")
    hbm = _measured(receipt, "cuda.hbm_bandwidth")
    return {
        "gpu": sku,
        "gemm_bf16_tflops": gemm,
        "gemm_bf16_peak_tflops": row.get("bf16_dense_tflops"),
        "gemm_ratio": _ratio(gemm, row.get("bf16_dense_tflops")),
        "hbm_copy_gbps": hbm,
        "hbm_peak_gbps": row.get("hbm_gbps"),
        "hbm_ratio": _ratio(hbm, row.get("hbm_gbps")),
        "peak_source": row.get("source"),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m imagectl.validators.compute.peaks RECEIPT", file=sys.stderr)
        return 2
    try:
        receipt = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: {args[0]}: not a readable receipt ({exc})", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(figures(receipt), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
