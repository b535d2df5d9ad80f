"""--baseline: deltas per figure, per size and per GPU pair; the regression policy; refusals."""

from __future__ import annotations

import pytest

from imagectl.core.errors import UserError
from imagectl.validators.baseline import compare_to_baseline
from imagectl.validators.receipt import GpuSummary, Receipt
from imagectl.validators.results import CheckResult, Outcome, Severity
from tests.support import flat, make_receipt


def check(id, measured, unit, gpu=None, **details):
    return CheckResult(
        id=id,
        title=id,
        severity=Severity.INFO,
        outcome=Outcome.PASS,
        measured=measured,
        unit=unit,
        gpu=gpu,
        details=details,
    )


def receipt() -> Receipt:
    sizes = [
        {
            "bytes": 1 << 20,
            "time_us": 50.0,
            "algbw_gbps": 21.0,
            "busbw_gbps": 36.7,
            "ok": True,
            "gate": False,
        },
        {
            "bytes": 1 << 30,
            "time_us": 4000.0,
            "algbw_gbps": 268.4,
            "busbw_gbps": 469.8,
            "ok": True,
            "gate": True,
        },
    ]
    pairs = [{"src": 0, "dst": 1, "gbps": 380.0}, {"src": 1, "dst": 0, "gbps": 379.0}]
    gpus = [GpuSummary(index=i, name="NVIDIA H100 80GB HBM3", outcome="pass") for i in (0, 1)]
    return make_receipt(
        "ami-prod", "h100-training", "sha256:" + "0" * 64, profile="quick", host="node-1",
        expectations={"shape": "p5.48xlarge", "gpu": "H100-SXM-80GB"},
        gpus=gpus,
        checks=[
            check("cuda.gemm.bf16", 720.0, "TFLOP/s", gpu=0),
            check("cuda.gemm.bf16", 722.0, "TFLOP/s", gpu=1),
            check("collective.all_reduce", 469.8, "GB/s", sizes=sizes),
            check("cuda.p2p_bandwidth", 379.0, "GB/s", pairs=pairs),
            check("collective.rendezvous", 12.0, "s"),
            check("collective.nccl_version", "2.26.2", None),
            check("cuda.init", None, "ms"),
        ],
    )  # fmt: skip


def by_id(results):
    return {(r.id, r.gpu): r for r in results}


def edit(rec: Receipt, id: str, gpu: int | None = None) -> CheckResult:
    return next(c for c in rec.checks if c.id == id and c.gpu == gpu)


def test_same_figures_pass_with_zero_deltas():
    out = by_id(compare_to_baseline(receipt(), receipt(), max_regression_pct=5))
    assert out[("baseline.summary", None)].outcome is Outcome.PASS
    assert out[("baseline.summary", None)].details["compared"] == 5
    assert out[("baseline.cuda.gemm.bf16", 1)].measured == 0.0
    sizes = out[("baseline.collective.all_reduce", None)].details["sizes"]
    assert [s["delta_pct"] for s in sizes] == [0.0, 0.0]


def test_regression_beyond_the_limit_fails_and_names_the_figure():
    cur = receipt()
    edit(cur, "cuda.gemm.bf16", 1).measured = 612.0  # -15.2 %
    out = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=10))
    bad = out[("baseline.cuda.gemm.bf16", 1)]
    assert bad.outcome is Outcome.FAIL and bad.measured == pytest.approx(-15.24, abs=0.01)
    assert out[("baseline.cuda.gemm.bf16", 0)].outcome is Outcome.PASS
    summary = out[("baseline.summary", None)]
    assert summary.outcome is Outcome.FAIL and summary.details["regressed"] == [
        {"id": "baseline.cuda.gemm.bf16", "gpu": 1}
    ]
    # the same drop inside a looser policy passes
    loose = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=20))
    assert loose[("baseline.summary", None)].outcome is Outcome.PASS


def test_per_size_gates_only_the_gated_sizes():
    cur = receipt()
    rows = edit(cur, "collective.all_reduce").details["sizes"]
    rows[0]["busbw_gbps"] = 18.0  # -51 % at 1 MiB: latency-bound, reported only
    out = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=10))
    result = out[("baseline.collective.all_reduce", None)]
    assert result.outcome is Outcome.PASS
    assert result.details["sizes"][0]["delta_pct"] == pytest.approx(-50.95, abs=0.01)
    rows[1]["busbw_gbps"] = 400.0  # -14.9 % at 1 GiB: gated
    result = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=10))[
        ("baseline.collective.all_reduce", None)
    ]
    assert result.outcome is Outcome.FAIL and f"size {1 << 30}" in result.message


def test_a_single_slow_gpu_pair_is_named():
    cur = receipt()
    edit(cur, "cuda.p2p_bandwidth").details["pairs"][1]["gbps"] = 250.0
    result = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=10))[
        ("baseline.cuda.p2p_bandwidth", None)
    ]
    assert result.outcome is Outcome.FAIL and "pair 1->0" in result.message


def test_lower_is_better_and_text_figures_are_reported_not_gated():
    cur = receipt()
    edit(cur, "collective.rendezvous").measured = 30.0  # slower start: +150 %
    edit(cur, "collective.nccl_version").measured = "2.27.3"
    out = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=10))
    assert out[("baseline.collective.rendezvous", None)].outcome is Outcome.PASS
    assert out[("baseline.collective.rendezvous", None)].measured == 150.0
    summary = out[("baseline.summary", None)]
    assert summary.details["changed"] == [
        {"id": "collective.nccl_version", "gpu": None, "current": "2.27.3", "baseline": "2.26.2"}
    ]
    assert "2.26.2 -> 2.27.3" in summary.message


def test_missing_figures_warn():
    cur = receipt()
    cur.checks = [c for c in cur.checks if not (c.id == "cuda.gemm.bf16" and c.gpu == 1)]
    summary = by_id(compare_to_baseline(cur, receipt(), max_regression_pct=10))[
        ("baseline.summary", None)
    ]
    assert summary.outcome is Outcome.WARN
    assert summary.details["missing_in_current"] == [{"id": "cuda.gemm.bf16", "gpu": 1}]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda r: r.expectations.update(shape="a3-highgpu-8g"), "shape 'a3-highgpu-8g'"),
        (lambda r: r.expectations.update(gpu="H200-SXM-141GB"), "GPU model 'H200-SXM-141GB'"),
        # a receipt from a host with no expectations still names its GPUs (NVML)
        (
            lambda r: (r.expectations.clear(), setattr(r.gpus[0], "name", "NVIDIA A100-SXM4-80GB")),
            "GPU 'NVIDIA A100-SXM4-80GB'",
        ),
    ],
)
def test_refuses_a_baseline_from_elsewhere(change, words):
    base = receipt()
    change(base)
    with pytest.raises(UserError) as err:
        compare_to_baseline(receipt(), base, max_regression_pct=10)
    assert words in str(err.value) and err.value.exit_code == 2


def test_negative_limit_is_bad_input():
    with pytest.raises(UserError, match="percentage"):
        compare_to_baseline(receipt(), receipt(), max_regression_pct=-1)


def test_real_smoke_receipt_against_a_faster_baseline():
    """The smoke checks' own output carries what the comparison needs (ids, units, figures)."""
    import os
    import types

    if os.environ.get("CI") != "true":
        pytest.importorskip("torch")
    from imagectl.validators.compute import smoke_checks

    checks = smoke_checks(types.SimpleNamespace(), device="cpu", profile="quick", nvml=None)
    current = make_receipt(None, None, None, profile="quick", checks=checks)
    faster = current.model_copy(deep=True)
    for c in faster.checks:
        if isinstance(c.measured, float):
            c.measured *= 1.5  # the baseline was 50 % faster: this run is 33 % slower
    out = by_id(compare_to_baseline(current, faster, max_regression_pct=25))
    gated = [r for key, r in out.items() if key[0] != "baseline.summary"]
    assert {r.id for r in gated} >= {"baseline.cuda.gemm.bf16", "baseline.cuda.hbm_bandwidth"}
    assert all(
        r.outcome is Outcome.FAIL and r.measured == pytest.approx(-33.33, abs=0.01) for r in gated
    )
    assert out[("baseline.summary", None)].measured == len(gated)


def test_real_receipts_carry_shape_and_gpu_for_the_baseline_gate(tmp_path) -> None:
    """Receipts written by `imagectl validate` name shape and GPU where the baseline
    comparison finds them: a baseline from another shape is refused (exit 2)."""
    import subprocess
    import sys
    from pathlib import Path

    snaps = Path(__file__).resolve().parents[1] / "snapshots" / "healthy"
    out = {}
    for name in ("h100-sxm-8x", "a100-sxm-80gb-8x"):
        out[name] = tmp_path / f"{name}.json"
        subprocess.run(
            [sys.executable, "-m", "imagectl.cli.common", "validate", "--replay",
             str(snaps / f"{name}.json"), "--no-hygiene", "-o", str(out[name])],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert out[name].exists()
    done = subprocess.run(
        [sys.executable, "-m", "imagectl.cli.common", "validate", "--replay",
         str(snaps / "h100-sxm-8x.json"), "--no-hygiene",
         "--baseline", str(out["a100-sxm-80gb-8x"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "shape" in flat(done.stderr) or "GPU model" in flat(done.stderr)
    same = subprocess.run(
        [sys.executable, "-m", "imagectl.cli.common", "validate", "--replay",
         str(snaps / "h100-sxm-8x.json"), "--no-hygiene", "--baseline", str(out["h100-sxm-8x"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr
