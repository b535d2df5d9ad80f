"""Counts are always checked: the GPU count against the shape or ``--gpu-count``, NVSwitch
and fabric manager only where the shape or the GPU table says the GPUs share NVSwitches.

The sick host is a real one (tests/snapshots/real/h100-1x-2026-11-28.json: one H100 SXM, no
fabric manager installed) described as eight GPUs: gpu.count fails and the host is taken
out (DRAIN: NVIDIA's gpu_count node check drains, then resets, reboots, sends for service),
and fabric manager is not blamed on an image (BLOCK_IMAGE) for a baseboard whose GPUs are
not there. The control is the same host
described as it is: one GPU, which shares no switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.validators.expectations import resolve_expectations
from imagectl.validators.session import Options, validate
from imagectl.validators.snapshot import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "snapshots" / "real" / "h100-1x-2026-11-28.json"


def _run(sku: str, count: int):  # type: ignore[no-untyped-def]
    expect = resolve_expectations(
        images_dir=ROOT / "images", expect_file=None, shape=None, gpu=(sku, count)
    )
    return validate(
        Options(
            profile="boot", expect=expect, snapshot=load_snapshot(REAL), snapshot_path=str(REAL)
        )
    )


def test_fewer_gpus_than_gpu_count_fails_the_count_and_takes_the_node_out() -> None:
    receipt = _run("H100-SXM-80GB", 8)
    checks = {c.id: c for c in receipt.checks}
    count = checks["gpu.count"]
    assert count.failed and count.action.value == "DRAIN"
    assert (count.measured, count.expected) == (1, 8)
    assert "--gpu-count" in " ".join(count.message.split())
    for fm in ("sw.fabricmanager.active", "sw.fabricmanager.version"):
        assert checks[fm].outcome.value == "skip", checks[fm].message
        assert checks[fm].details.get("root_cause") == "gpu.count"
    assert receipt.worst_action.value != "BLOCK_IMAGE"  # the node, not the image


def test_the_same_host_described_as_it_is_passes() -> None:
    receipt = _run("H100-SXM-80GB", 1)
    checks = {c.id: c for c in receipt.checks}
    assert checks["gpu.count"].outcome.value == "pass"
    assert checks["sw.fabricmanager.active"].outcome.value == "skip"
    assert receipt.verdict == "pass", [c for c in receipt.checks if c.failed]


@pytest.mark.parametrize(
    ("sku", "count", "nvswitch"),
    [
        ("H100-SXM-80GB", 8, True),  # HGX H100 8-GPU: four NVSwitches
        ("H100-SXM-80GB", 4, False),  # HGX H100 4-GPU: NVLink directly, no NVSwitch
        ("H100-SXM-80GB", 2, False),  # a VM given part of a baseboard
        ("H200-SXM-141GB", 8, True),
        ("B200", 8, True),
        ("A100-SXM-80GB", 4, False),
        ("H100-NVL", 2, False),  # NVLink bridge pairs, never NVSwitch
        ("L4", 8, False),
    ],
)
def test_nvswitch_is_expected_only_at_the_baseboard_count_of_the_gpu_table(
    sku: str, count: int, nvswitch: bool
) -> None:
    expect = resolve_expectations(
        images_dir=ROOT / "images", expect_file=None, shape=None, gpu=(sku, count)
    )
    assert expect.hardware is not None and expect.hardware.nvswitch is nvswitch
    # the whole baseboard: its GPUs' NVLink links per NVIDIA's datasheet (H100/H200/B200 18,
    # A100 12); part of one: not known, so not expected
    links = {"H100-SXM-80GB": 18, "H200-SXM-141GB": 18, "B200": 18}.get(sku, 0)
    assert expect.hardware.nvlink_links == (links if nvswitch else 0)
