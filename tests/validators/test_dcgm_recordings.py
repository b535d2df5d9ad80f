"""DCGM diagnostics judged from recorded ``dcgmi diag -j`` runs (tests/fixtures/dcgm/,
written from DCGM 4.4.1's sources: see its README): one result per DCGM test and GPU, the
action from DCGM's own severity of each DCGM_FR_* code, and never a pass without a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from imagectl.validators.dcgm import dcgm_checks
from imagectl.validators.dcgm.parse import DiagFormatError, parse_diag
from imagectl.validators.dcgm.table import tables
from imagectl.validators.expectations import Expectations
from imagectl.validators.results import Action, Outcome

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
PINNED = Expectations(dcgm="1:4.4.1-1")
UNPINNED = Expectations()


def rec(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((FIXTURES / "recordings" / f"{name}.json").read_text())
    return out


def replay(name: str, expect: Expectations = PINNED, profile: str = "quick") -> list[Any]:
    return dcgm_checks(profile, expect, recorded=rec(name), replay=True, deadline_s=60.0)


def by_id(results: list[Any]) -> dict[tuple[str, int | None], Any]:
    return {(r.id, r.gpu): r for r in results}


JSON_RECORDINGS = sorted(
    p.stem for p in (FIXTURES / "recordings").glob("*.json") if p.stem.startswith(("h100", "h200"))
)


@pytest.mark.parametrize("name", JSON_RECORDINGS)
def test_recordings_follow_dcgms_own_schema(name: str) -> None:
    """testing/python3/dcgm_diag_schema.json (DCGM v4.4.1) accepts every recorded stdout."""
    schema = json.loads((FIXTURES / "dcgm_diag_schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(json.loads(rec(name)["stdout"]))


# Levels per NvidiaValidationSuite.cpp FillTestVectors (v4.4.1).
R2 = {"software", "memory", "pcie"}
R3 = R2 | {"diagnostic", "nvbandwidth", "memory_bandwidth", "targeted_stress", "targeted_power"}


@pytest.mark.parametrize(
    ("name", "tests", "device"),
    [
        ("h100-8x-r2-pass", R2, "2330"),
        ("h100-8x-r3-pass", R3, "2330"),
        ("h200-8x-r2-pass", R2, "2335"),
    ],
)
def test_healthy_runs_report_every_dcgm_test_per_gpu(
    name: str, tests: set[str], device: str
) -> None:
    results = replay(name)
    run = results[0]
    assert run.id == "dcgm.diag" and run.outcome == Outcome.PASS, run.message
    assert run.details["dcgm_version"] == "4.4.1" and set(run.details["tests"]) == tests
    per_test = [r for r in results if r.id != "dcgm.diag"]
    assert {r.id for r in per_test} == {f"dcgm.{t}" for t in tests}
    assert {(r.id, r.gpu) for r in per_test} == {(f"dcgm.{t}", g) for t in tests for g in range(8)}
    assert all(r.outcome == Outcome.PASS for r in per_test)
    assert all(r.details["device_id"] == device for r in per_test)


def test_dcgm_sku_thresholds_are_cited() -> None:
    """diag-skus.yaml.in: H100 80GB HBM3 (2330) targeted_stress 29250, targeted_power 700 W,
    memory_bandwidth 1,905,000; the result carries what DCGM judged against, with its source."""
    results = by_id(replay("h100-8x-r3-pass"))
    ts = results[("dcgm.targeted_stress", 0)]
    assert ts.expected["target_stress"] == 29250.0 and "2330" in ts.source
    assert results[("dcgm.targeted_power", 5)].expected["target_power"] == 700.0
    assert results[("dcgm.memory_bandwidth", 7)].expected["minimum_bandwidth"] == 1905000
    h200 = by_id(replay("h200-8x-r2-pass"))[("dcgm.pcie", 0)]
    assert "H200 (2335)" in h200.source and h200.expected["min_pci_width"] == 16


# Each failure kind with DCGM's severity of its code (dcgmlib/src/dcgm_errors.c) and our
# action for that severity (validators/data/dcgm.yaml: ISOLATE -> ISOLATE_RMA, TRIAGE -> DRAIN).
FAILURES = [
    (
        "h100-8x-r2-memory-mismatch",
        "dcgm.memory",
        [3],
        "DCGM_FR_MEMORY_MISMATCH",
        58,
        Action.ISOLATE_RMA,
    ),
    (
        "h100-8x-r2-pcie-replay",
        "dcgm.pcie",
        [5],
        "DCGM_FR_PCIE_H_REPLAY_VIOLATION",
        98,
        Action.ISOLATE_RMA,
    ),
    (
        "h100-8x-r2-nvlink-p2p",
        "dcgm.pcie",
        [4, 7],
        "DCGM_FR_BROKEN_P2P_NVLINK_",
        None,
        Action.ISOLATE_RMA,
    ),
    (
        "h100-8x-r3-sm-stress-level",
        "dcgm.targeted_stress",
        [2],
        "DCGM_FR_STRESS_LEVEL",
        50,
        Action.RESET_GPU,  # its next step SYSTEM_TRIAGE_MSG: "Reset GPU. ... Rerun diagnostics."
    ),
    (
        "h100-8x-r3-targeted-power",
        "dcgm.targeted_power",
        [6],
        "DCGM_FR_TARGET_POWER",
        63,
        Action.DRAIN,
    ),
]


@pytest.mark.parametrize(("name", "check", "gpus", "code", "number", "action"), FAILURES)
def test_each_failure_kind_fails_with_its_action(
    name: str, check: str, gpus: list[int], code: str, number: int | None, action: Action
) -> None:
    results = replay(name)
    failing = [r for r in results if r.failed]
    assert {(r.id, r.gpu) for r in failing} == {(check, g) for g in gpus}
    for r in failing:
        assert r.outcome == Outcome.FAIL and r.action == action
        err = r.details["errors"][0]
        assert err["name"].startswith(code) and code in r.message
        assert number is None or err["code"] == number
        assert r.source and err["name"] in r.source
    # every other GPU's result of that test still passes
    others = [r for r in results if r.id == check and r.gpu not in gpus]
    assert len(others) == 8 - len(gpus) and all(r.outcome == Outcome.PASS for r in others)
    run = results[0]
    assert run.outcome == Outcome.PASS and check.split(".")[1] in run.details["failing_tests"]


def test_monitor_severity_warns_without_failing() -> None:
    """DCGM_ERROR_MONITOR: 'Can perform workload, but needs to be monitored' (dcgm_errors.h)."""
    results = replay("h100-8x-r3-temp-monitor")
    warn = by_id(results)[("dcgm.targeted_stress", 0)]
    assert warn.outcome == Outcome.WARN and warn.action == Action.NONE
    assert warn.details["errors"][0]["dcgm_severity"] == "MONITOR"
    assert not any(r.failed for r in results)


def test_runtime_error_fails_with_the_message() -> None:
    (run,) = replay("h100-8x-r2-runtime-error")
    assert run.id == "dcgm.diag" and run.outcome == Outcome.FAIL and run.action == Action.DRAIN
    assert "Host engine connection invalid" in run.message and "235" in run.message


def test_missing_dcgmi_blocks_the_image_only_when_pinned() -> None:
    (pinned,) = replay("missing", PINNED)
    assert pinned.outcome == Outcome.FAIL and pinned.action == Action.BLOCK_IMAGE
    assert "1:4.4.1-1" in pinned.message and "image is broken" in pinned.message
    (unpinned,) = replay("missing", UNPINNED)
    assert unpinned.outcome == Outcome.SKIP and "does not pin DCGM" in unpinned.message


@pytest.mark.parametrize(
    ("name", "outcome", "needle"),
    [
        ("hang", Outcome.FAIL, "within 600.0 s (its hard timeout)"),
        ("crash-signal", Outcome.ERROR, "SIGSEGV"),
        ("crash-exit1", Outcome.ERROR, "libdcgm.so.4"),
        ("garbage-text", Outcome.ERROR, "not JSON"),
        ("garbage-shape", Outcome.ERROR, "test_categories[0].tests: expected an array"),
    ],
)
def test_no_verdict_is_never_a_pass(name: str, outcome: Outcome, needle: str) -> None:
    (run,) = replay(name)
    assert run.id == "dcgm.diag" and run.outcome == outcome and run.failed
    assert needle in run.message and run.action != Action.NONE


def test_nonzero_exit_without_a_failing_test_is_an_error() -> None:
    """dcgmi exits non-zero only when a test reported an error (Diag.cpp GetFailureResult)."""
    record = {**rec("h100-8x-r2-pass"), "exit_code": 226}
    (run, *_rest) = dcgm_checks("quick", PINNED, recorded=record, replay=True, deadline_s=60)
    assert run.outcome == Outcome.ERROR and "NVVS_ERROR" in run.message


def test_replay_without_a_dcgm_section_skips() -> None:
    (r,) = dcgm_checks("quick", PINNED, recorded=None, replay=True, deadline_s=60)
    assert r.outcome == Outcome.SKIP and "not recorded in this snapshot" in r.message
    (b,) = dcgm_checks("boot", PINNED, recorded=rec("h100-8x-r2-pass"), replay=True, deadline_s=60)
    assert b.outcome == Outcome.SKIP


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"DCGM Diagnostic": {}}',
        '{"DCGM Diagnostic": {"test_categories": []}}',
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": '
        '[{"name": "memory", "results": [{"status": "Maybe"}]}]}]}}',
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": '
        '[{"name": "memory", "results": [{"status": "Fail", "warnings": [{"warning": "x"}]}]}]}]}}',
    ],
)
def test_parser_refuses_other_shapes(text: str) -> None:
    with pytest.raises(DiagFormatError):
        parse_diag(text)


def test_code_table_is_dcgms() -> None:
    """Spot checks against dcgm_errors.h / dcgm_errors.c (v4.4.1), and every severity routed."""
    t = tables()
    assert (t.code(52).name, t.code(52).severity) == ("DCGM_FR_FAULTY_MEMORY", "ISOLATE")
    assert (t.code(63).name, t.code(63).severity) == ("DCGM_FR_TARGET_POWER", "TRIAGE")
    assert (t.code(85).name, t.code(85).severity) == ("DCGM_FR_PENDING_ROW_REMAP", "RESET")
    assert t.code(120).name == "DCGM_FR_FALLEN_OFF_BUS" and len(t.codes) == 121
    assert {c.severity for c in t.codes.values()} <= set(t.severities)
    names = {c.name for c in t.codes.values()}
    assert set(t.overrides) <= names
    assert t.route(t.code(999)).action == Action.RESET_GPU  # a code newer than the table
    assert {lv.level for lv in t.levels.values()} == {2, 3, 4}


def test_error_table_generator_reads_dcgms_macros() -> None:
    """errors_source.build on excerpts of DCGM 4.4.1's dcgm_errors.h / dcgm_errors.c: codes,
    multi-line ``*_MSG`` strings, ``*_NEXT`` naming another macro, and the meta table."""
    from imagectl.validators.dcgm.errors_source import build

    header = r"""
#define TRIAGE_RUN_FIELD_DIAG_MSG "Run a field diagnostic on the GPU."
typedef enum dcgmError_enum
{
    DCGM_FR_OK                       = 0,  //!< 0 No error
    DCGM_FR_STRESS_LEVEL               = 50, //!< 50 Stress level is too low (bad performance)
    DCGM_FR_FAULTY_MEMORY              = 52, //!< 52 Faulty memory detected on this GPU
    DCGM_FR_ERROR_SENTINEL                 = 121, //!< 120 MUST BE THE LAST ERROR CODE
} dcgmError_t;
#define DCGM_FR_OK_MSG           "The operation completed successfully."
#define DCGM_FR_STRESS_LEVEL_MSG                                      \
    "Max stress level of %.1f did not reach desired stress level of " \
    "%.1f for GPU %u"
#define DCGM_FR_FAULTY_MEMORY_MSG "Found %lld faulty memory elements on GPU %u"
#define DCGM_FR_OK_NEXT           "N/A"
#define DCGM_FR_FAULTY_MEMORY_NEXT      TRIAGE_RUN_FIELD_DIAG_MSG
"""
    table = """
    DCGM_ERROR_TABLE_ENTRY(DCGM_FR_OK, DCGM_ERROR_UNKNOWN, DCGM_FR_EC_NONE),
    DCGM_ERROR_TABLE_ENTRY(DCGM_FR_STRESS_LEVEL, DCGM_ERROR_TRIAGE, DCGM_FR_EC_PERF_THRESHOLD),
    DCGM_ERROR_TABLE_ENTRY(DCGM_FR_FAULTY_MEMORY, DCGM_ERROR_ISOLATE, DCGM_FR_EC_HARDWARE_MEMORY),
"""
    doc = build(header, table, "v4.4.1", "ca755f1")
    codes = doc["codes"]
    assert isinstance(codes, dict) and set(codes) == {0, 50, 52}
    assert codes[50]["message"] == (
        "Max stress level of %.1f did not reach desired stress level of %.1f for GPU %u"
    )
    assert codes[52] == {
        "name": "DCGM_FR_FAULTY_MEMORY",
        "severity": "ISOLATE",
        "category": "HARDWARE_MEMORY",
        "message": "Found %lld faulty memory elements on GPU %u",
        "suggestion": "Run a field diagnostic on the GPU.",
    }
    assert codes[50]["severity"] == "TRIAGE" and codes[50]["suggestion"] == ""


def test_action_is_the_codes_next_step_not_its_severity() -> None:
    """DCGM_FR_UNCONTAINED_ERROR is severity ISOLATE, but its next step (dcgm_errors.h
    DCGM_FR_UNCONTAINED_ERROR_NEXT = DCGM_FR_VOLATILE_DBE_DETECTED_NEXT) is "Drain the GPU
    and reset it or reboot the node.": drain and reset, not RMA."""
    results = replay("h100-8x-r2-uncontained")
    failing = [r for r in results if r.failed]
    assert [(r.id, r.gpu, r.action) for r in failing] == [("dcgm.memory", 2, Action.DRAIN)]
    assert failing[0].details["errors"][0]["dcgm_severity"] == "ISOLATE"
    assert "Drain the GPU and reset it" in (failing[0].source or "")


def test_nvvs_binary_missing_blocks_the_image() -> None:
    """DCGM_ST_NVVS_BINARY_NOT_FOUND (-52): the image's DCGM install is incomplete."""
    (run,) = replay("h100-8x-r2-nvvs-missing")
    assert run.id == "dcgm.diag" and run.outcome == Outcome.FAIL
    assert run.action == Action.BLOCK_IMAGE and run.details["dcgm_status"] == (
        "DCGM_ST_NVVS_BINARY_NOT_FOUND"
    )
    # another runtime error keeps the default (a person looks)
    (other,) = replay("h100-8x-r2-runtime-error")
    assert other.action == Action.DRAIN and other.details["dcgm_status"] is None


def test_a_skip_keeps_its_error_code() -> None:
    """targeted_power skips a GPU whose enforced power limit is too low, with
    DCGM_FR_ENFORCED_POWER_LIMIT (TargetedPower_wrapper.cpp): not a plain skip."""
    results = by_id(replay("h100-8x-r3-power-limit-skip", profile="full"))
    r = results[("dcgm.targeted_power", 5)]
    assert r.outcome == Outcome.FAIL and r.action == Action.DRAIN
    assert r.details["dcgm_status"] == "Skip" and r.details["errors"][0]["code"] == 72
    assert results[("dcgm.targeted_power", 4)].outcome == Outcome.PASS


def test_the_level_that_ran_must_be_the_profiles() -> None:
    """full runs `dcgmi diag -r 3`: a level-2 recording does not satisfy it."""
    results = replay("h100-8x-r2-pass", profile="full")
    run = results[0]
    assert run.id == "dcgm.diag" and run.outcome == Outcome.FAIL
    assert run.action == Action.BLOCK_IMAGE and "level 2" in run.message
    assert all(r.outcome == Outcome.PASS for r in results[1:])  # its tests still judged
    assert replay("h100-8x-r3-pass", profile="quick")[0].outcome == Outcome.PASS


def test_monitor_only_run_with_a_nonzero_exit_warns_with_its_source() -> None:
    run = replay("h100-8x-r3-temp-monitor", profile="full")[0]
    assert run.outcome == Outcome.WARN and run.details["exit_code"] == 226
    assert "GetFailureResult" in (run.source or "")


def test_every_next_step_in_the_table_is_dcgms() -> None:
    """Each routed next step is the text of at least one DCGM_FR_*_NEXT (dcgm_errors.yaml)."""
    t = tables()
    texts = {c.suggestion.strip() for c in t.codes.values()}
    assert set(t.next_steps) <= texts
