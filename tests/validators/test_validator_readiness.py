"""No silent downgrade: on a host whose expectations name GPUs, the quick profile needs the
validator's toolkit and CUDA, and their absence blocks the image; it never passes on the CPU.

This machine is such a host when judged against an 8x H100 expect.json: torch is the CPU
build and there is no driver. The tests stand in for torch and libcuda only at their own
boundaries: a meta-path hook that hides torch (as on an image whose venv lacks it) and a
tiny ``libcuda.so.1`` built here whose ``cuInit`` returns a CUresult (as a broken driver's).
Everything else is the real ``imagectl validate`` on the real host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from validator_support import ROOT, expect_file

from tests.support import require_tool

IMAGECTL = str(Path(sys.executable).parent / "imagectl")

HIDE_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None
sys.meta_path.insert(0, _NoTorch())
"""

FAKE_LIBCUDA = """
int cuInit(unsigned int flags) { return %d; }
int cuDeviceGetCount(int *count) { *count = 0; return 0; }
"""


def _validate(tmp_path: Path, *extra: str, **env: str) -> tuple[int, dict]:
    log = tmp_path / "kern.log"
    log.write_text("")
    out = tmp_path / "receipt.json"
    proc = subprocess.run(
        [IMAGECTL, "validate", "--profile", "quick", "--expect", str(expect_file("h100-sxm-8x")),
         "--no-hygiene", "--kernel-log", str(log), "-o", str(out), "--json", *extra],
        cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.returncode, json.loads(out.read_text())


def _by_id(receipt: dict) -> dict[str, dict]:
    return {c["id"]: c for c in receipt["checks"]}


def _never_ran_on_cpu(receipt: dict) -> None:
    for c in receipt["checks"]:
        assert (c.get("details") or {}).get("floors") != "not applicable on cpu", c["id"]
        if c["id"].startswith(("cuda.gemm", "cuda.hbm", "collective.")):
            assert c["outcome"] != "pass", f"{c['id']} passed without CUDA"
    assert receipt["coverage"]["device"] == "cuda"


def test_cpu_torch_on_a_gpu_host_blocks_the_image(tmp_path) -> None:
    rc, receipt = _validate(tmp_path)
    assert rc == 1 and receipt["verdict"] == "fail"
    assert receipt["worst_action"] == "BLOCK_IMAGE"
    checks = _by_id(receipt)
    toolkit = checks["validator.toolkit"]
    assert toolkit["outcome"] == "error" and toolkit["action"] == "BLOCK_IMAGE"
    assert "CPU-only build" in toolkit["message"]
    init = checks["cuda.init"]
    assert init["outcome"] == "fail" and init["action"] == "BLOCK_IMAGE"
    assert "libcuda.so.1" in init["message"]
    coverage = checks["validation.coverage"]
    assert coverage["outcome"] == "fail" and coverage["action"] == "BLOCK_IMAGE"
    assert "cuda.gemm.bf16" in receipt["coverage"]["not_run"]
    _never_ran_on_cpu(receipt)


def test_missing_torch_is_an_error_that_blocks_never_a_skip(tmp_path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HIDE_TORCH)
    rc, receipt = _validate(tmp_path, PYTHONPATH=str(hook))
    assert rc == 1 and receipt["worst_action"] == "BLOCK_IMAGE"
    toolkit = _by_id(receipt)["validator.toolkit"]
    assert toolkit["outcome"] == "error" and toolkit["action"] == "BLOCK_IMAGE"
    assert "No module named 'torch'" in toolkit["message"]
    assert not [c for c in receipt["checks"] if c["outcome"] == "skip" and "torch" in c["message"]]
    _never_ran_on_cpu(receipt)


@pytest.mark.parametrize(
    ("rc", "name"),
    [(999, "CUDA_ERROR_UNKNOWN"), (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
     (100, "CUDA_ERROR_NO_DEVICE")],
)  # fmt: skip
def test_cuinit_failure_names_its_reason(tmp_path, rc: int, name: str) -> None:
    require_tool("gcc")
    lib = tmp_path / "lib"
    lib.mkdir()
    src = tmp_path / "cuda.c"
    src.write_text(FAKE_LIBCUDA % rc)
    subprocess.run(
        [shutil.which("gcc") or "gcc", "-shared", "-fPIC", "-o", str(lib / "libcuda.so.1"),
         str(src)], check=True,
    )  # fmt: skip
    code, receipt = _validate(tmp_path, LD_LIBRARY_PATH=str(lib))
    assert code == 1 and receipt["worst_action"] == "BLOCK_IMAGE"
    init = _by_id(receipt)["cuda.init"]
    assert init["outcome"] == "fail" and init["action"] == "BLOCK_IMAGE"
    assert f"cuInit returned {rc} ({name}" in init["message"]
    if not Path("/dev/nvidia0").exists():  # this machine: the host fact is named too
        assert "/dev/nvidia" in init["message"]
    _never_ran_on_cpu(receipt)


def test_cpu_when_the_shape_has_no_gpu(tmp_path) -> None:
    """The same code on the CPU is right where the shape has no GPU (the local stack)."""
    from imagectl.validators.expectations import Expectations
    from imagectl.validators.session import resolve_device

    assert resolve_device("auto", Expectations(gpus_expected=False)) == "cpu"
    assert resolve_device("auto", Expectations(gpu="H100-SXM-80GB", gpu_count=8)) == "cuda"
    assert resolve_device("cpu", Expectations(gpu="H100-SXM-80GB", gpu_count=8)) == "cpu"
