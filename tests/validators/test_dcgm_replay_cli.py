"""End to end: ``imagectl validate --profile quick --replay FILE --json`` on the healthy
8x H100 (and 8x H200) snapshot carrying a recorded DCGM run reports the DCGM tests; each
failing recording fails the receipt with its action. Snapshots are built here from
tests/snapshots/healthy/ plus tests/fixtures/dcgm/recordings/ (make_recordings.with_dcgm)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from validator_support import SNAPSHOTS, expect_file, imagectl_in_process

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"


def _make_recordings() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_recordings", FIXTURES / "make_recordings.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def validate(tmp_path: Path, base: str, recording: str | None) -> dict[str, Any]:
    snap = json.loads((SNAPSHOTS / "healthy" / f"{base}.json").read_text())
    if recording is not None:
        rec = json.loads((FIXTURES / "recordings" / f"{recording}.json").read_text())
        snap = _make_recordings().with_dcgm(snap, rec, f"DCGM {recording}")
    path = tmp_path / f"{base}--{recording}.json"
    path.write_text(json.dumps(snap))
    out = imagectl_in_process(
        "validate", "--profile", "quick", "--replay", str(path), "--expect",
        str(expect_file(base)), "--json",
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    receipt: dict[str, Any] = json.loads(out.stdout)
    receipt["_rc"] = out.returncode
    return receipt


def dcgm(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in receipt["checks"] if c["id"].startswith("dcgm.")]


@pytest.mark.parametrize(
    ("base", "recording", "tests"),
    [
        ("h100-sxm-8x", "h100-8x-r2-pass", {"software", "memory", "pcie"}),
        ("h200-8x", "h200-8x-r2-pass", {"software", "memory", "pcie"}),
    ],
)
def test_healthy_replay_reports_the_dcgm_tests(
    tmp_path: Path, base: str, recording: str, tests: set[str]
) -> None:
    checks = dcgm(validate(tmp_path, base, recording))
    assert {c["id"] for c in checks} == {"dcgm.diag"} | {f"dcgm.{t}" for t in tests}
    assert len(checks) == 1 + 8 * len(tests)
    assert all(c["outcome"] == "pass" for c in checks), [c["message"] for c in checks]


# recording -> failing check, GPUs and action (each code's next step -> action:
# validators/data/dcgm.yaml next_steps; DCGM's severity where the next step is empty)
@pytest.mark.parametrize(
    ("recording", "check", "gpus", "action"),
    [
        ("h100-8x-r2-memory-mismatch", "dcgm.memory", [3], "ISOLATE_RMA"),
        ("h100-8x-r2-pcie-replay", "dcgm.pcie", [5], "ISOLATE_RMA"),
        ("h100-8x-r2-nvlink-p2p", "dcgm.pcie", [4, 7], "ISOLATE_RMA"),
        ("h100-8x-r3-sm-stress-level", "dcgm.targeted_stress", [2], "RESET_GPU"),
        ("h100-8x-r3-targeted-power", "dcgm.targeted_power", [6], "DRAIN"),
        ("missing", "dcgm.diag", [None], "BLOCK_IMAGE"),
        ("hang", "dcgm.diag", [None], "REBOOT"),
    ],
)
def test_failing_recording_fails_the_receipt_with_its_action(
    tmp_path: Path, recording: str, check: str, gpus: list[int | None], action: str
) -> None:
    receipt = validate(tmp_path, "h100-sxm-8x", recording)
    failing = [c for c in dcgm(receipt) if c["outcome"] in ("fail", "error")]
    assert sorted((c["id"], c["gpu"] if c["gpu"] is not None else -1) for c in failing) == sorted(
        (check, g if g is not None else -1) for g in gpus
    )
    assert all(c["action"] == action for c in failing)
    assert receipt["_rc"] == 1 and receipt["verdict"] == "fail"
    assert receipt["worst_action"] == action
    failed_gpus = {g["index"] for g in receipt["gpus"] if g["outcome"] == "fail"}
    assert {g for g in gpus if g is not None} <= failed_gpus


def test_snapshot_without_dcgm_skips(tmp_path: Path) -> None:
    (diag,) = dcgm(validate(tmp_path, "h100-sxm-8x", None))
    assert diag["outcome"] == "skip" and "not recorded in this snapshot" in diag["message"]
