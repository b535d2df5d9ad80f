"""``validate --toolkit host`` and ``--gpu/--gpu-count``: a host you already run, validated
on the torch it has. The pin is recorded, not applied; a missing or CPU-only torch
is still an error, never a pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.validators.compute.readiness import toolkit_result
from imagectl.validators.results import Action, Outcome
from tests.support import flat

REAL = Path(__file__).resolve().parents[1] / "snapshots" / "real" / "h200-1x-2026-11-28.json"
PIN = {"torch": "2.9.1", "cuda": "12.8", "variant": "cu128"}
CUDA_130 = {"toolkit": {"installed": True, "version": "2.11.0+cu130", "cuda": "13.0"}}


def test_the_hosts_toolkit_passes_and_says_it_is_not_the_pin() -> None:
    r = toolkit_result(CUDA_130, PIN, "cuda", host=True)
    assert r.outcome is Outcome.PASS
    assert "not the stack's pin (torch 2.9.1, CUDA 12.8)" in r.message
    assert r.expected == PIN and r.measured == {"torch": "2.11.0+cu130", "cuda": "13.0"}
    # the same facts without --toolkit host fail the pin, as before
    assert toolkit_result(CUDA_130, PIN, "cuda").outcome is Outcome.FAIL


@pytest.mark.parametrize(
    ("facts", "device", "why"),
    [
        ({"toolkit": {"installed": False, "error": "No module named 'torch'"}}, "cuda", "missing"),
        (
            {"toolkit": {"installed": True, "version": "2.11.0+cpu", "cuda": None}},
            "cuda",
            "CPU-only",
        ),
    ],
)
def test_the_hosts_toolkit_must_still_be_there_and_run_cuda(facts, device, why) -> None:
    r = toolkit_result(facts, None, device, host=True)
    assert r.outcome is Outcome.ERROR and r.action is Action.BLOCK_IMAGE and why in r.message


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--gpu", "H200-SXM-141GB"], "--gpu and --gpu-count go together"),
        (["--gpu", "H200-SXM-141GB", "--gpu-count", "1", "--shape", "p5.48xlarge"], "not both"),
        (["--gpu", "H999", "--gpu-count", "1"], "unknown GPU 'H999'"),
        (["--toolkit", "host", "--toolkit-wheelhouse", "x.tar"], "Pass one of them"),
    ],
)
def test_bad_host_options_are_exit_2(argv, words) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "imagectl", "validate", "--replay", str(REAL), *argv],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert words in " ".join(proc.stderr.split()) and "Traceback" not in flat(proc.stderr)


def test_gpu_expectations_come_from_the_gpu_table() -> None:
    from imagectl.validators.expectations import resolve_expectations

    images = Path(__file__).resolve().parents[2] / "images"
    one = resolve_expectations(
        images_dir=images, expect_file=None, shape=None, gpu=("H200-SXM-141GB", 1)
    )
    assert (one.gpu, one.gpu_count, one.origin) == ("H200-SXM-141GB", 1, "gpu:H200-SXM-141GBx1")
    assert one.hardware is not None and one.hardware.nvml_names == ["NVIDIA H200"]
    assert one.hardware.nvswitch is False  # one GPU uses no switch
    eight = resolve_expectations(
        images_dir=images, expect_file=None, shape=None, gpu=("H200-SXM-141GB", 8)
    )
    assert eight.hardware is not None and eight.hardware.nvswitch is True
    assert eight.hardware.pcie_gen is None and eight.hardware.nics is None  # no shape facts
