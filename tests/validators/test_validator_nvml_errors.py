"""Class 5, NVML errors: what each nvmlReturn_t means for the GPU the call was made on.

Cases follow the NVML API reference (nvmlReturn_t, "For <arch> or newer fully supported
devices"); the real runner and checks run on a replay backend that raises pynvml's own
error classes.
"""

from __future__ import annotations

import copy
from typing import Any

import pynvml
import pytest
from validator_support import SNAPSHOTS, expect_file

from imagectl.validators.checks import REGISTRY
from imagectl.validators.expectations import from_file
from imagectl.validators.nvml.errors import known_error_names
from imagectl.validators.nvml.policy import nvml_policy
from imagectl.validators.results import Action, CheckResult, Outcome
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot


def _run(
    base: str, change: Any, *ids: str, expect: bool = True
) -> dict[tuple[str, int | None], CheckResult]:
    snap = copy.deepcopy(load_snapshot(SNAPSHOTS / f"healthy/{base}.json"))
    common = snap["nvml"].pop("common", {})
    snap["nvml"]["devices"] = [{**common, **d} for d in snap["nvml"]["devices"]]
    change(snap["nvml"]["devices"])
    ctx = build_context(
        Options(expect=from_file(expect_file(base)) if expect else None, snapshot=snap)
    )
    results = run_checks([REGISTRY["nvml.init"], *(REGISTRY[i] for i in ids)], ctx)
    return {(r.id, r.gpu): r for r in results}


def test_every_nvml_error_but_not_offered_fails_with_an_action() -> None:
    """UNKNOWN, TIMEOUT, IRQ_ISSUE and every other code: never a skip, never action NONE."""
    policy = nvml_policy()
    for name in known_error_names():
        rule = policy.error(name)
        if name in ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND"):
            assert rule.skip, name
        else:
            assert not rule.skip and rule.action != Action.NONE, name
            assert rule.source.startswith("NVML API reference"), name
    assert policy.error("IRQ_ISSUE").action == Action.REBOOT
    assert policy.error("GPU_IS_LOST").action == Action.REBOOT
    assert policy.error("RESET_REQUIRED").action == Action.RESET_GPU


@pytest.mark.parametrize(
    ("error", "action"),
    [("UNKNOWN", Action.RESET_GPU), ("TIMEOUT", Action.RESET_GPU), ("IRQ_ISSUE", Action.REBOOT)],
)
def test_an_error_fails_only_the_gpu_it_came_from(error: str, action: Action) -> None:
    def change(devs: list[dict[str, Any]]) -> None:
        devs[6]["nvmlDeviceGetPcieReplayCounter"] = {"$error": error}

    res = _run("h100-sxm-8x", change, "gpu.pcie.replay")
    bad = res[("gpu.pcie.replay", 6)]
    assert bad.outcome == Outcome.FAIL and bad.action == action
    assert bad.details["nvml_error"] == error
    assert bad.details["call"] == "nvmlDeviceGetPcieReplayCounter"
    others = [r for (cid, g), r in res.items() if cid == "gpu.pcie.replay" and g != 6]
    assert len(others) == 7 and all(r.outcome == Outcome.PASS for r in others)


ECC_VOLATILE_UNC = f"{pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED},{pynvml.NVML_VOLATILE_ECC}"


def test_not_supported_where_peers_answer_fails_that_gpu() -> None:
    """nvmlDeviceGetTotalEccErrors has no architecture rule (ECC devices only): the peers
    of the same model decide."""

    def change(devs: list[dict[str, Any]]) -> None:
        devs[2]["nvmlDeviceGetTotalEccErrors"] = {ECC_VOLATILE_UNC: {"$error": "NOT_SUPPORTED"}}

    res = _run("a100-sxm-80gb-8x", change, "gpu.ecc.volatile_uncorrected")
    r = res[("gpu.ecc.volatile_uncorrected", 2)]
    assert r.outcome == Outcome.FAIL and r.action == Action.RESET_GPU
    assert r.details["peers_answering"] == [0, 1, 3, 4, 5, 6, 7]


def test_not_supported_everywhere_is_a_skip() -> None:
    """No GPU of the model answers and the architecture rule does not name the call."""

    def change(devs: list[dict[str, Any]]) -> None:
        for d in devs:
            d["nvmlDeviceGetTotalEccErrors"] = {ECC_VOLATILE_UNC: {"$error": "NOT_SUPPORTED"}}

    res = _run("h200-8x", change, "gpu.ecc.volatile_uncorrected")
    outcomes = {r.outcome for (cid, _), r in res.items() if cid == "gpu.ecc.volatile_uncorrected"}
    assert outcomes == {Outcome.SKIP}


def test_not_supported_on_a_call_for_all_products_fails_without_peers() -> None:
    """nvmlDeviceGetTemperature: 'For all products'; a single L4 has no peer to ask."""

    def change(devs: list[dict[str, Any]]) -> None:
        devs[0]["nvmlDeviceGetTemperature"] = {"0": {"$error": "NOT_SUPPORTED"}}

    r = _run("l4-1x", change, "gpu.temperature")[("gpu.temperature", 0)]
    assert r.outcome == Outcome.FAIL and r.action == Action.RESET_GPU
    assert "For all products" in (r.source or "")


def test_not_supported_on_a_single_gpu_host_is_judged_by_architecture() -> None:
    """An L4 (Ada) has no peer; nvmlDeviceGetRemappedRows is 'Ampere or newer'."""

    def change(devs: list[dict[str, Any]]) -> None:
        devs[0]["nvmlDeviceGetRemappedRows"] = {"$error": "NOT_SUPPORTED"}

    res = _run("l4-1x", change, "gpu.row_remap.pending")
    r = res[("gpu.row_remap.pending", 0)]
    assert r.outcome == Outcome.FAIL and r.action == Action.RESET_GPU
    assert r.details["min_arch"] == pynvml.NVML_DEVICE_ARCH_AMPERE


def test_function_not_found_is_a_driver_without_the_call() -> None:
    """An older driver lacks the symbol on every GPU: a skip, whatever the architecture."""

    def change(devs: list[dict[str, Any]]) -> None:
        devs[0].pop("nvmlDeviceGetRemappedRows")

    res = _run("l4-1x", change, "gpu.row_remap.pending")
    assert res[("gpu.row_remap.pending", 0)].outcome == Outcome.SKIP


def test_an_unreadable_counter_is_never_zero_pass() -> None:
    """The SRAM uncorrectable counter of one H200 cannot be read: no pass on the other one."""

    def change(devs: list[dict[str, Any]]) -> None:
        for d in devs:
            d["nvmlDeviceGetMemoryErrorCounter"] = dict(d["nvmlDeviceGetMemoryErrorCounter"])
            key = f"{pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED},{pynvml.NVML_AGGREGATE_ECC},7"
            d["nvmlDeviceGetMemoryErrorCounter"][key] = {"$error": "NOT_SUPPORTED"}

    res = _run("h200-8x", change, "gpu.ecc.sram")
    outcomes = {r.outcome for (cid, _), r in res.items() if cid == "gpu.ecc.sram"}
    assert outcomes == {Outcome.SKIP}


def test_a_lost_gpu_handle_does_not_blind_the_others() -> None:
    def change(devs: list[dict[str, Any]]) -> None:
        devs[5] = {"$error": "GPU_IS_LOST"}

    res = _run("h100-sxm-8x", change, "gpu.memory", "gpu.uuid", "gpu.inforom")
    init = res[("nvml.init", 5)]
    assert init.outcome == Outcome.FAIL and init.action == Action.REBOOT
    assert res[("nvml.init", None)].outcome == Outcome.PASS
    lost = res[("gpu.memory", 5)]
    assert lost.outcome == Outcome.FAIL and lost.details["root_cause"] == "nvml.init"
    for gpu in (0, 1, 2, 3, 4, 6, 7):
        assert res[("gpu.memory", gpu)].outcome == Outcome.PASS
        assert res[("gpu.inforom", gpu)].outcome == Outcome.PASS
    assert res[("gpu.uuid", None)].outcome == Outcome.PASS


def test_mig_not_supported_on_one_h100_of_eight_fails_it() -> None:
    """NOT_SUPPORTED on one H100 whose seven peers answer fails; an L4 (not MIG-capable,
    no peer) is simply without MIG."""

    def change(devs: list[dict[str, Any]]) -> None:
        devs[4]["nvmlDeviceGetMigMode"] = {"$error": "NOT_SUPPORTED"}

    res = _run("h100-sxm-8x", change, "gpu.mig_mode")
    r = res[("gpu.mig_mode", 4)]
    assert r.outcome == Outcome.FAIL and r.action == Action.RESET_GPU
    assert res[("gpu.mig_mode", 3)].outcome == Outcome.PASS

    def l4(devs: list[dict[str, Any]]) -> None:
        devs[0]["nvmlDeviceGetMigMode"] = {"$error": "NOT_SUPPORTED"}

    assert _run("l4-1x", l4, "gpu.mig_mode")[("gpu.mig_mode", 0)].outcome == Outcome.PASS


def test_device_count_failing_names_its_action() -> None:
    """nvmlInit works but nvmlDeviceGetCount fails: every NVML check carries that action."""
    snap = copy.deepcopy(load_snapshot(SNAPSHOTS / "healthy/h100-sxm-8x.json"))
    snap["nvml"]["system"]["nvmlDeviceGetCount"] = {"$error": "IRQ_ISSUE"}
    ctx = build_context(Options(expect=from_file(expect_file("h100-sxm-8x")), snapshot=snap))
    init, memory = run_checks([REGISTRY["nvml.init"], REGISTRY["gpu.memory"]], ctx)
    assert init.outcome == Outcome.FAIL and init.action == Action.REBOOT
    assert memory.outcome == Outcome.FAIL and memory.action == Action.REBOOT
    assert memory.details["root_cause"] == "nvml.init"
