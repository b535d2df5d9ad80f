"""GEMM correctness against the fp64 reference, and the cross-device comparison, on CPU.

The faulty device comes from the documented hook IMAGECTL_FAULT_GEMM, honoured by the
production code path (gemm.run_gemm), not from a stand-in.
"""

from __future__ import annotations

import os

import pytest

from imagectl.validators.compute import gemm
from imagectl.validators.compute.checks import consistency_check, gemm_checks
from imagectl.validators.results import Action, Outcome

torch = pytest.importorskip("torch") if os.environ.get("CI") != "true" else __import__("torch")

CPU3 = [torch.device("cpu")] * 3


def gpu_of(i):
    return i


def run(dtype, devices=CPU3):
    return gemm.run_gemm(torch, devices, dtype, check_n=96, perf_n=64, iters=1)


@pytest.mark.parametrize("dtype", gemm.DTYPES)
def test_every_dtype_is_correct_and_identical_across_devices(dtype):
    runs = run(dtype)
    assert all(r.correct for r in runs)
    assert all(0 < r.rel_error <= gemm.TOLERANCE[dtype] or dtype == "fp32" for r in runs)
    assert all(r.tflops and r.tflops > 0 for r in runs)
    result = gemm.consistency(torch, runs)
    assert result == {"groups": [[0, 1, 2]], "outliers": [], "max_abs_diff": {}}
    checks = gemm_checks(runs, {}, "cpu", gpu_of)
    assert [c.outcome for c in checks] == [Outcome.PASS] * 3
    assert all(c.details["floors"] == "not applicable on cpu" for c in checks)


def test_a_wrong_answer_fails_correctness_and_consistency(monkeypatch):
    monkeypatch.setenv("IMAGECTL_FAULT_GEMM", "1")
    runs = run("bf16")
    checks = gemm_checks(runs, {}, "cpu", gpu_of)
    assert [c.outcome for c in checks] == [Outcome.PASS, Outcome.FAIL, Outcome.PASS]
    assert checks[1].gpu == 1 and checks[1].action is Action.ISOLATE_RMA
    assert "relative error" in checks[1].message
    verdict = consistency_check({"bf16": gemm.consistency(torch, runs)}, 3, gpu_of)
    assert verdict.outcome is Outcome.FAIL and verdict.measured == [1]


def test_one_flipped_bit_passes_the_tolerance_but_not_the_comparison(monkeypatch):
    monkeypatch.setenv("IMAGECTL_FAULT_GEMM", "2:ulp")
    runs = run("fp32")
    assert all(r.correct for r in runs)  # inside the fp32 tolerance
    result = gemm.consistency(torch, runs)
    assert result["groups"] == [[0, 1], [2]] and result["outliers"] == [2]
    assert 0 < result["max_abs_diff"][2] < 1e-4
    verdict = consistency_check({"fp32": result}, 3, gpu_of)
    assert verdict.outcome is Outcome.FAIL and "[2]" in verdict.message


def test_two_devices_that_disagree_are_both_named(monkeypatch):
    monkeypatch.setenv("IMAGECTL_FAULT_GEMM", "0:ulp")
    result = gemm.consistency(torch, run("fp16", CPU3[:2]))
    assert result["outliers"] == [0, 1]  # no majority: cannot tell which one is wrong


def test_fp32_tolerance_catches_reduced_precision():
    # What tf32 (10-bit mantissa) would do to fp32 inputs: the fp32 check must reject it.
    a, b, ref = gemm.reference_inputs(torch, 96, "fp32")
    tf32_like = (a.to(torch.bfloat16).float() @ b.to(torch.bfloat16).float()).double()
    rel = float((tf32_like - ref).abs().max()) / float(ref.abs().max())
    assert rel > gemm.TOLERANCE["fp32"]
