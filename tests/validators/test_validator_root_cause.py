"""One root cause is reported once: on a host where NVML cannot
initialise (no GPUs visible, the driver not loaded), every NVML check fails with
``details.root_cause = "nvml.init"``. The receipt keeps every one of them (the gate and
coverage read them), but the table shows ``nvml.init`` once with its reason and one row
naming every check that was not run because of it, not the same paragraph 28 times."""

from __future__ import annotations

import json

import pytest
from validator_support import SNAPSHOTS, imagectl_in_process

FAULT = SNAPSHOTS / "faults" / "h100-sxm-8x--driver-not-loaded.json"
REASON = "NVMLError_DriverNotLoaded"


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def test_the_receipt_keeps_every_affected_check() -> None:
    run = imagectl_in_process("validate", "--replay", str(FAULT), "--json")
    receipt = json.loads(run.stdout)
    affected = [c["id"] for c in receipt["checks"] if c["details"].get("root_cause") == "nvml.init"]
    assert len(affected) >= 20  # what the table must fold into one row


def test_the_table_says_the_root_cause_once_and_names_every_affected_check() -> None:
    receipt = json.loads(imagectl_in_process("validate", "--replay", str(FAULT), "--json").stdout)
    affected = sorted(
        {c["id"] for c in receipt["checks"] if c["details"].get("root_cause") == "nvml.init"}
    )
    run = imagectl_in_process("validate", "--replay", str(FAULT))
    assert run.returncode == 1
    text = run.stdout
    assert text.count(REASON) == 1, text
    assert len(text.splitlines()) < 60, text
    flat = " ".join(text.split())
    assert f"{len(affected)} checks not run: nvml.init failed" in flat
    listed = flat.split(f"{len(affected)} checks not run: nvml.init failed", 1)[1]
    for check in affected:
        assert check in listed.replace("│ ", "").replace(" │", ""), check
    # the checks that do not depend on NVML keep their own rows
    assert "sw.kernel.module_flavour" in flat
