"""The rules behind the fabric fault classes, below the snapshot library: SXid severity words and
names (NVSwitch driver headers), buckets that need hands, NVML recovery actions 5-7 and
newer, and what MIG does to NVLink per architecture. The whole-host verdicts are the
library's (tests/snapshots/faults_fabric.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from validator_support import SNAPSHOTS, expect_file

from imagectl.core.errors import UserError
from imagectl.validators.catalogs import _check_hands, thresholds, xid_catalog
from imagectl.validators.expectations import from_file
from imagectl.validators.host.sxid_source import build
from imagectl.validators.nvml.policy import nvml_policy
from imagectl.validators.results import Action, Outcome
from imagectl.validators.session import Options, validate
from imagectl.validators.snapshot import load_snapshot


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("Fatal, Link 32 egress non-posted PRIV error (First)", "Fatal"),
        ("Non-fatal, Link 28 MINION nonfatal interrupt", "Non-fatal"),
        ("Correctable, Link 05 TCEN0 crumbstore ECC limit error", "Correctable"),
        ("Severity 1 Engine instance 32 Sub-engine instance 00", "Fatal"),
        ("Severity 0 Engine instance 28 Sub-engine instance 00", "Non-fatal"),
        # the first word decides: a non-fatal line that mentions "fatal" later stays non-fatal
        ("Non-fatal, Link 05 fatal error counter threshold", "Non-fatal"),
        ("Data {0x00000000, 0x00000000}", None),
        ("Module 3 failed boot", None),
    ],
)
def test_an_sxid_line_names_its_own_severity(text: str, word: str | None) -> None:
    sev = xid_catalog().sxid.severity_of(text)
    assert (sev.word if sev else None) == word


def test_the_strongest_severity_of_an_incident_decides() -> None:
    policy = xid_catalog().sxid
    fatal, nonfatal, corrected = (policy.severity_of(f"{w}, Link 1 x") for w in
                                  ("Fatal", "Non-fatal", "Correctable"))  # fmt: skip
    assert fatal and nonfatal and corrected
    assert policy.strongest([nonfatal, fatal, corrected]) is fatal
    assert fatal.outcome == Outcome.FAIL and fatal.action == Action.RESET_GPU
    assert fatal.persists == Action.REBOOT  # Fabric Manager: reboot if it persists
    assert nonfatal.outcome == Outcome.WARN and nonfatal.action == Action.NONE
    assert corrected.outcome == Outcome.PASS
    unworded = policy.strongest([])
    assert unworded.outcome == Outcome.FAIL and "imagectl policy" in unworded.source


def test_sxid_names_come_from_the_driver_headers() -> None:
    cat = xid_catalog()
    entry = cat.lookup("sxid", 12028)
    assert entry.known and entry.meaning == "NVSWITCH_ERR_HW_NPORT_EGRESS_PRIVRSPERR"
    assert "ctrl_dev_nvswitch.h" in entry.source and "595.45.04" in entry.source
    assert cat.lookup("sxid", 20034).meaning == "NVSWITCH_ERR_HW_DLPL_LTSSM_FAULT_UP"
    assert not cat.lookup("sxid", 99999).known


def test_the_sxid_table_generator_reads_the_enum() -> None:
    header = """
typedef enum nvswitch_err_type
{
    NVSWITCH_ERR_NO_ERROR                                  = 0x0,
    NVSWITCH_ERR_HW_HOST                                   = 10000,
    NVSWITCH_ERR_HW_HOST_PRIV_ERROR                        = 10001,
    NVSWITCH_ERR_HW_DLPL_LTSSM_FAULT_UP                    = 20034,
    NVSWITCH_ERR_HW_ALIAS_OF_HOST                          = 10000,
} NVSWITCH_ERR_TYPE;
"""
    doc = build(header, "595.45.04", "df1c9a3")
    assert doc["codes"] == {
        10000: "NVSWITCH_ERR_HW_HOST",
        10001: "NVSWITCH_ERR_HW_HOST_PRIV_ERROR",
        20034: "NVSWITCH_ERR_HW_DLPL_LTSSM_FAULT_UP",
    }
    assert "595.45.04" in str(doc["source"])


def test_buckets_that_need_hands_never_end_at_a_reboot() -> None:
    cat = xid_catalog()
    assert cat.lookup("xid", 54).bucket == "CHECK_MECHANICALS"
    assert cat.lookup("xid", 54).action == Action.DRAIN
    assert cat.lookup("xid", 54).recurrence_action == Action.ISOLATE_RMA
    assert cat.lookup("xid", 78).action == Action.DRAIN  # UPDATE_SWFW
    wrong = dict(cat.xids)
    wrong[54] = type(cat.xids[54])(54, "aux power", Action.REBOOT, "x", bucket="CHECK_MECHANICALS")
    with pytest.raises(UserError, match="Xid 54"):
        _check_hands(wrong, {"buckets": ["CHECK_MECHANICALS"], "action": "DRAIN"})


@pytest.mark.parametrize(
    ("value", "name", "action"),
    [
        (1, "GPU_RESET", Action.RESET_GPU),
        (2, "NODE_REBOOT", Action.REBOOT),
        (4, "DRAIN_AND_RESET", Action.DRAIN),
        (5, "RECOVER_IMEX_DOMAIN", Action.DRAIN),
        (6, "BUS_RESET", Action.REBOOT),
        (7, "SYSTEM_REBOOT", Action.REBOOT),
    ],
)
def test_nvml_recovery_actions_map_to_theirs(value: int, name: str, action: Action) -> None:
    rec = thresholds().recovery(value)
    assert (rec.name, rec.action) == (name, action)
    assert "nvml.h" in rec.source


def test_an_unknown_recovery_action_is_never_weaker_than_a_reboot() -> None:
    for value in (8, 12, 255):
        rec = thresholds().recovery(value)
        assert rec.action.rank >= Action.REBOOT.rank
        assert rec.name == f"UNKNOWN({value})" and "imagectl policy" in rec.source


def test_mig_turns_nvlink_off_per_architecture() -> None:
    policy = nvml_policy()
    ampere, hopper = policy.mig_links(7), policy.mig_links(9)
    assert ampere.links_off and "Fabric Manager User Guide" in ampere.source
    assert "trained off" in ampere.source
    assert hopper.links_off and "kernel_nvlinkstate.c" in hopper.source
    assert policy.mig_links(None).links_off and policy.mig_links(42) == policy.mig_links(None)


def test_a_snapshot_without_its_kernel_log_is_not_a_clean_log(tmp_path: Path) -> None:
    """Evidence that was never recorded is replayed as unreadable: kernel.xid fails."""
    snap = json.loads((SNAPSHOTS / "healthy/h100-sxm-8x.json").read_text())
    del snap["kernel_log"]
    path = tmp_path / "no-log.json"
    path.write_text(json.dumps(snap))
    receipt = validate(
        Options(
            expect=from_file(expect_file("h100-sxm-8x")),
            snapshot=load_snapshot(path),
            snapshot_path=str(path),
        )
    )
    failed = {c.id: c for c in receipt.checks if c.failed}
    assert set(failed) == {"kernel.xid", "kernel.sxid"}
    assert failed["kernel.xid"].action == Action.DRAIN
    assert "not recorded" in failed["kernel.xid"].message
