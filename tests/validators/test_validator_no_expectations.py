"""A host with GPUs and no expectations (no expect.json, no --stack/--expect/--shape) is bad
input, exit 2 with a clear message, never a pass built of skips."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from validator_support import ROOT, SNAPSHOTS

from imagectl.validators.expectations import nvidia_gpus_on_host
from tests.support import flat

IMAGECTL = str(Path(sys.executable).parent / "imagectl")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [IMAGECTL, "validate", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_gpu_snapshot_without_expectations_is_exit_2(tmp_path) -> None:
    snap = json.loads((SNAPSHOTS / "healthy/h100-sxm-8x.json").read_text())
    del snap["host"]["expect_file"]  # an image without /etc/imagectl/expect.json
    path = tmp_path / "no-expect.json"
    path.write_text(json.dumps(snap))
    out = _run("--replay", str(path))
    assert out.returncode == 2, out.stdout[-1000:]
    assert "8 NVIDIA GPU(s) but no expectations" in flat(out.stderr)
    assert "--stack" in flat(out.stderr) and "Traceback" not in flat(out.stderr)
    assert out.stdout == ""


def test_the_same_snapshot_with_a_shape_is_judged(tmp_path) -> None:
    snap = json.loads((SNAPSHOTS / "healthy/h100-sxm-8x.json").read_text())
    del snap["host"]["expect_file"]
    path = tmp_path / "no-expect.json"
    path.write_text(json.dumps(snap))
    out = _run("--replay", str(path), "--shape", "p5.48xlarge", "--json")
    assert out.returncode in (0, 1), out.stderr
    assert json.loads(out.stdout)["expectations"]["gpu_count"] == 8


def test_gpus_are_counted_on_the_pci_bus(tmp_path) -> None:
    """sysfs: NVIDIA (0x10de) display/3D controllers count, NVSwitches and others do not."""
    for name, vendor, klass in [
        ("0000:18:00.0", "0x10de", "0x030200"),  # H100 (3D controller)
        ("0000:2a:00.0", "0x10de", "0x030000"),  # VGA
        ("0000:07:00.0", "0x10de", "0x068000"),  # NVSwitch (bridge)
        ("0000:00:1f.0", "0x8086", "0x030000"),  # another vendor's display
    ]:
        dev = tmp_path / name
        dev.mkdir()
        (dev / "vendor").write_text(vendor + "\n")
        (dev / "class").write_text(klass + "\n")
    assert nvidia_gpus_on_host(tmp_path) == 2
