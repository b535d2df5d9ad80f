"""Snapshots captured on real GPU hosts (``tests/snapshots/real/``, where and when in its
README) replay healthy through the real CLI: every check passes or skips, at every profile a
snapshot replays. A new file in the folder is a new case; its README row says what it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REAL = Path(__file__).resolve().parents[1] / "snapshots" / "real"
SNAPSHOTS = sorted(p for p in REAL.glob("*.json") if not p.name.endswith(".figures.json"))
# what each real host is (its GPU model and count): the host had no catalog shape
HOSTS = {
    "h200-1x-2026-11-28.json": ("H200-SXM-141GB", 1),
    "h100-1x-2026-11-28.json": ("H100-SXM-80GB", 1),
}


def test_every_real_snapshot_is_described() -> None:
    readme = (REAL / "README.md").read_text(encoding="utf-8")
    assert SNAPSHOTS, "no real snapshot"
    for path in SNAPSHOTS:
        assert f"`{path.name}`" in readme, f"{path.name}: add its row (where, when) to the README"
        assert path.name in HOSTS, f"{path.name}: say which GPUs the host had"


def _replay(path: Path, profile: str) -> dict[str, Any]:
    gpu, count = HOSTS[path.name]
    proc = subprocess.run(
        [sys.executable, "-m", "imagectl", "validate", "--replay", str(path), "--gpu", gpu,
         "--gpu-count", str(count), "--profile", profile, "--no-hygiene", "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    receipt: dict[str, Any] = json.loads(proc.stdout)
    return receipt


@pytest.mark.parametrize("profile", ["boot", "quick"])
@pytest.mark.parametrize("path", SNAPSHOTS, ids=[p.stem for p in SNAPSHOTS])
def test_a_real_healthy_host_replays_healthy(path: Path, profile: str) -> None:
    receipt = _replay(path, profile)
    bad = [
        f"{c['id']} {c['outcome']}: {c['message']}"
        for c in receipt["checks"]
        if c["outcome"] not in ("pass", "skip")
    ]
    assert bad == [] and receipt["verdict"] == "pass", bad
    ran = {c["id"] for c in receipt["checks"] if c["outcome"] == "pass"}
    # the checks the first real runs got wrong ran and passed on the recorded values
    assert {"gpu.ecc.sram", "gpu.ecc.dram", "gpu.row_remap.failure", "kernel.xid"} <= ran
    if profile == "quick":
        assert {"load.clock_events", "load.temperature", "load.sm_clock"} <= ran


def test_the_real_snapshot_recorded_the_structures_that_crashed_the_first_capture() -> None:
    """Driver 580.159.04 answered both once they were passed by pointer; a snapshot taken
    with nvidia-ml-py's own wrappers recorded an error or crashed."""
    for path in SNAPSHOTS:
        device = json.loads(path.read_text(encoding="utf-8"))["nvml"]["devices"][0]
        for name in ("nvmlDeviceGetSramEccErrorStatus", "nvmlDeviceGetGpuFabricInfoV"):
            assert "$error" not in device[name], (path.name, name, device[name])
