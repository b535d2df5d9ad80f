"""The live path on this machine (no GPU): the real CLI, the real pynvml, the host's own
tools and files, the real journal/dmesg. NVML unavailable fails the GPU checks with a clear action;
software and hygiene checks still report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from validator_support import ROOT

IMAGECTL = str(Path(sys.executable).parent / "imagectl")


def test_boot_profile_without_a_gpu(tmp_path: Path) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver loaded")
    receipt_path = tmp_path / "receipt.json"
    out = subprocess.run(
        [IMAGECTL, "validate", "--profile", "boot", "--json", "-o", str(receipt_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "IMAGECTL_ROOT": str(ROOT)},
    )
    assert out.returncode == 1, out.stderr
    receipt = json.loads(out.stdout)
    assert receipt == json.loads(receipt_path.read_text())
    assert receipt["mode"] == "live" and receipt["verdict"] == "fail"
    by_id: dict[str, list[dict]] = {}
    for c in receipt["checks"]:
        by_id.setdefault(c["id"], []).append(c)
    (init,) = by_id["nvml.init"]
    assert init["outcome"] == "fail" and init["action"] == "BLOCK_IMAGE"
    assert "libnvidia-ml.so.1" in init["message"] and init["measured"] == "LIBRARY_NOT_FOUND"
    for gpu_check in ("gpu.count", "gpu.ecc.mode", "gpu.temperature", "gpu.nvlink.active"):
        (c,) = by_id[gpu_check]
        assert c["outcome"] == "fail" and c["action"] == "BLOCK_IMAGE"
        assert c["message"].startswith("not checked: NVML unavailable")
    assert receipt["worst_action"] == "BLOCK_IMAGE"
    # software and hygiene checks still ran on the host's real facts
    for sw in (
        "sw.kernel.release",
        "sw.driver.library_match",
        "sw.nccl.version",
        "kernel.xid",
        "image.ssh_host_keys",
        "image.credentials",
        "image.shell_history",
    ):
        assert sw in by_id and by_id[sw][0]["outcome"] != "error", by_id.get(sw)
    assert receipt["host"]["kernel"] == os.uname().release


def test_boot_profile_with_the_local_stack_expects_no_gpu(tmp_path: Path) -> None:
    """The local (QEMU) stack's shape has no GPU: GPU checks skip, pins are judged."""
    out = subprocess.run(
        [IMAGECTL, "validate", "--stack", "local", "--json", "--no-hygiene"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "IMAGECTL_ROOT": str(ROOT)},
    )
    receipt = json.loads(out.stdout)
    checks = {c["id"]: c for c in receipt["checks"]}
    assert checks["nvml.init"]["outcome"] == "skip"
    assert checks["gpu.ecc.mode"]["outcome"] == "skip"
    assert checks["sw.kernel.release"]["expected"] == "6.1.0-56-cloud-amd64"
    assert not any(c.startswith("image.") for c in checks)
    pinned = checks["sw.packages.pinned"]
    assert pinned["expected"] == {"jq": "1.6-2.1+deb12u3", "chrony": "4.3-2+deb12u3"}
    assert out.returncode == (0 if receipt["verdict"] == "pass" else 1)


def test_snapshot_of_this_host_replays_to_the_same_verdicts(tmp_path: Path) -> None:
    """Capture this (GPU-less) host, replay it: every check reaches the same outcome."""
    from validator_support import imagectl_in_process

    snap = tmp_path / "here.json"
    taken = imagectl_in_process("snapshot", "-o", str(snap), "--description", "test host")
    assert taken.returncode == 0, taken.stderr
    data = json.loads(snap.read_text())
    assert data["nvml"]["init"]["error"] in ("LIBRARY_NOT_FOUND", "DRIVER_NOT_LOADED", None)
    assert data["host"]["kernel_release"] == os.uname().release
    live = imagectl_in_process("validate", "--json")
    replayed = imagectl_in_process("validate", "--replay", str(snap), "--json")
    assert live.returncode == replayed.returncode
    outcomes = [
        {(c["id"], c["gpu"]): (c["outcome"], c["action"]) for c in json.loads(r.stdout)["checks"]}
        for r in (live, replayed)
    ]
    assert outcomes[0] == outcomes[1]
