"""Page retirement on pre-Ampere GPUs (the library's GPUs use row remapping instead)."""

from __future__ import annotations

import copy

from validator_support import SNAPSHOTS

from imagectl.validators.checks import REGISTRY
from imagectl.validators.expectations import Expectations, Hardware
from imagectl.validators.results import Action, CheckResult, Outcome
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot


def _retired(sbe: int, dbe: int, pending: int, arch: str | None = "Volta") -> list[CheckResult]:
    snap = copy.deepcopy(load_snapshot(SNAPSHOTS / "healthy/l4-1x.json"))
    dev = snap["nvml"]["devices"][0]
    dev["nvmlDeviceGetRetiredPages"] = {
        "0": [0x1000 * i for i in range(sbe)],
        "1": [0x9000 * i for i in range(dbe)],
    }
    dev["nvmlDeviceGetRetiredPagesPendingStatus"] = pending
    hw = Hardware(arch=arch) if arch else None
    ctx = build_context(Options(expect=Expectations(hardware=hw), snapshot=snap))
    return run_checks([REGISTRY["nvml.init"], REGISTRY["gpu.retired_pages"]], ctx)[1:]


def test_retired_pages_thresholds() -> None:
    (r,) = _retired(10, 2, 0)
    assert r.outcome == Outcome.PASS and r.measured == {"retired": 12, "pending": False}
    # DCGM DCGM_LIMIT_MAX_RETIRED_PAGES 63 ("updated to match the field diag"): 62 pass
    (r,) = _retired(40, 22, 0)
    assert r.outcome == Outcome.PASS
    (r,) = _retired(40, 23, 0)
    assert r.outcome == Outcome.FAIL and r.action == Action.ISOLATE_RMA
    (r,) = _retired(1, 0, 1)
    assert r.outcome == Outcome.FAIL and r.action == Action.REBOOT


def test_retired_pages_skip_on_row_remapping_gpus() -> None:
    (r,) = _retired(70, 0, 0, arch="Hopper")
    assert r.outcome == Outcome.SKIP and "row remapping" in r.message
