"""Expectations from a stack + the shape table, or from expect.json; the hardware table."""

from __future__ import annotations

from pathlib import Path

import pytest
from validator_support import ROOT

from imagectl.core.errors import UserError
from imagectl.stacks.expectations import from_stack
from imagectl.validators.expectations import (
    Expectations,
    from_file,
    hardware_for,
)
from imagectl.validators.session import Options, validate
from imagectl.validators.shapes import shape_rows
from imagectl.validators.snapshot import load_snapshot
from tests.support import flat

IMAGES = ROOT / "images"


def test_stack_and_shape_give_pins_and_hardware() -> None:
    e = from_stack(IMAGES, "h100-training", "a3-highgpu-8g")
    assert (e.driver, e.nccl, e.kernel_modules) == ("580.95.05", "2.26.2-1+cuda12.8", "open")
    assert e.fabric_manager == "580.95.05" and e.kernel == "6.8.0-1040-gcp"
    assert e.gpu == "H100-SXM-80GB" and e.gpu_count == 8 and e.cloud == "gcp"
    assert e.hardware is not None and e.hardware.nvswitch and e.hardware.nvlink_links == 18
    assert (e.hardware.pcie_gen, e.hardware.pcie_width) == (5, 16)
    assert e.packages["libnccl2"] == "2.26.2-1+cuda12.8"
    assert e.packages["nvidia-fabricmanager-580"] == "580.95.05"
    assert e.pins["nccl"] == e.nccl


def test_several_shapes_need_shape() -> None:
    with pytest.raises(UserError, match="several validation shapes"):
        from_stack(IMAGES, "h100-training", None)


def test_every_gpu_shape_has_sourced_hardware_fields() -> None:
    for shape, row in shape_rows(IMAGES / "catalog").items():
        _, hw = hardware_for(IMAGES, shape)
        if row.get("gpu") is None:
            assert hw is None
            continue
        assert hw is not None and hw.nvml_names and hw.memory_gib
        for field in ("pcie_gen", "pcie_width", "power_limit_w", "temp_warn_c", "temp_max_c"):
            assert getattr(hw, field) is not None, (shape, field)
        assert row["hardware_source"] and row["source"], shape


def test_expect_file_round_trip(tmp_path: Path) -> None:
    e = from_stack(IMAGES, "h100-training", "p5.48xlarge")
    path = tmp_path / "expect.json"
    path.write_text(e.model_dump_json())
    assert from_file(path).model_dump(exclude={"origin"}) == e.model_dump(exclude={"origin"})
    path.write_text("{ not json")
    with pytest.raises(UserError, match="line 1: not valid JSON"):
        from_file(path)
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(UserError, match="not UTF-8"):
        from_file(path)


def test_quick_profile_on_a_replay_skips_part_two_with_the_reason() -> None:
    snap = load_snapshot(ROOT / "tests/snapshots/healthy/h100-sxm-8x.json")
    r = validate(Options(profile="quick", expect=Expectations(), snapshot=snap))
    by_id = {c.id: c for c in r.checks}
    assert by_id["compute.smoke"].outcome.value == "skip"
    assert "replay" in by_id["compute.smoke"].message
    assert by_id["gpu.pcie.link_under_load"].outcome.value == "skip"
    assert r.verdict == "pass"


def test_expectations_on_standard_input_judge_the_replay_and_the_receipt_is_the_output(
    tmp_path,
) -> None:
    """How playbooks/validate.yml hands a host its expectations (``--expect -``) and takes
    its receipt back (``--json`` on standard output): one module run, no file on the host.
    A GPU count the snapshot does not have must fail, so the input was really read."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    snaps = Path(__file__).resolve().parents[1] / "snapshots"
    expect = json.loads((snaps / "expect" / "l4-1x.json").read_text())
    imagectl = str(Path(sys.executable).parent / "imagectl")
    args = [imagectl, "validate", "--profile", "boot", "--expect", "-", "--json",
            "--replay", str(snaps / "healthy" / "l4-1x.json")]  # fmt: skip

    def run(doc: dict) -> tuple[int, dict, str]:
        proc = subprocess.run(args, input=json.dumps(doc), capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        return (
            proc.returncode,
            (json.loads(proc.stdout) if proc.stdout.strip() else {}),
            proc.stderr,
        )

    code, receipt, err = run(expect)
    assert code == 0, err
    assert receipt["verdict"] == "pass" and receipt["expectations"]["gpu_count"] == 1
    code, receipt, err = run({**expect, "gpu_count": 8})
    assert code == 1 and receipt["verdict"] == "fail", err
    proc = subprocess.run(args, input="{not json", capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 2 and "not valid JSON" in flat(proc.stderr) and proc.stdout == ""
