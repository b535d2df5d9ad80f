"""Judging under load: the sampler reads NVML while load runs, and the loaded-profile
checks judge only samples taken under load (idle downtraining is normal)."""

from __future__ import annotations

import copy

from validator_support import SNAPSHOTS, expect_file

from imagectl.validators.checks import REGISTRY, specs_for
from imagectl.validators.expectations import from_file
from imagectl.validators.results import Action, CheckResult, Outcome
from imagectl.validators.runner import run_checks
from imagectl.validators.sampler import LoadSampler
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot


def _judge(util: int) -> dict[tuple[str, int | None], CheckResult]:
    snap = copy.deepcopy(load_snapshot(SNAPSHOTS / "healthy/h100-sxm-8x.json"))
    devices = snap["nvml"]["devices"]
    for d in devices:
        d["nvmlDeviceGetUtilizationRates"] = {"gpu": util, "memory": 40}
        d["nvmlDeviceGetCurrPcieLinkGeneration"] = 5
    devices[1]["nvmlDeviceGetCurrPcieLinkGeneration"] = 3  # downtrained while busy
    devices[2]["nvmlDeviceGetCurrentClocksEventReasons"] = 0x80  # power brake while busy
    devices[4]["nvmlDeviceGetTemperature"] = {"0": 80}  # hot under load: a warning
    ctx = build_context(
        Options(profile="quick", expect=from_file(expect_file("h100-sxm-8x")), snapshot=snap)
    )
    run_checks([REGISTRY["nvml.init"]], ctx)
    sampler = LoadSampler(ctx.nvml, ctx.handles)
    sampler.sample_once()
    sampler.sample_once()
    ctx.load_samples = sampler.samples
    loaded = [s for s in specs_for("quick") if "boot" not in s.profiles]
    return {(r.id, r.gpu): r for r in run_checks(loaded, ctx)}


def test_faults_under_load_are_caught() -> None:
    res = _judge(util=100)
    pcie = res[("gpu.pcie.link_under_load", 1)]
    assert pcie.outcome == Outcome.FAIL and pcie.action == Action.DRAIN
    assert pcie.measured == "Gen3 x16"
    brake = res[("gpu.load.clock_events", 2)]
    assert brake.outcome == Outcome.FAIL and "HW_POWER_BRAKE" in brake.measured
    hot = res[("gpu.load.temperature", 4)]
    assert hot.outcome == Outcome.WARN
    assert res[("gpu.pcie.link_under_load", 0)].outcome == Outcome.PASS


def test_idle_samples_are_not_judged() -> None:
    res = _judge(util=0)
    assert {r.outcome for r in res.values()} == {Outcome.SKIP}


def test_replay_judges_every_load_check_from_the_recorded_samples() -> None:
    """`validate --profile boot|quick|full --replay`: boot judges no load check; quick and
    full judge every load.* (and gpu.load.*) check per GPU from the snapshot's samples."""
    from imagectl.validators.compute.recorded import LOAD_IDS
    from imagectl.validators.session import validate

    name = "faults/h100-sxm-8x--load-healthy.json"
    for profile in ("boot", "quick", "full"):
        receipt = validate(
            Options(
                profile=profile,
                expect=from_file(expect_file("h100-sxm-8x")),
                snapshot=load_snapshot(SNAPSHOTS / name),
            )
        )
        loads = [c for c in receipt.checks if c.id.startswith(("load.", "gpu.load."))]
        assert receipt.verdict == "pass", [c for c in receipt.checks if c.failed]
        if profile == "boot":
            assert not loads
            continue
        judged = {(c.id, c.gpu) for c in loads if c.outcome == Outcome.PASS}
        assert {(cid, g) for cid in LOAD_IDS for g in range(8)} <= judged
        assert {("gpu.load.clock_events", g) for g in range(8)} <= judged


def test_replay_without_load_samples_skips_the_load_checks() -> None:
    from imagectl.validators.session import validate

    receipt = validate(
        Options(
            profile="quick",
            expect=from_file(expect_file("h100-sxm-8x")),
            snapshot=load_snapshot(SNAPSHOTS / "healthy/h100-sxm-8x.json"),
        )
    )
    loads = [c for c in receipt.checks if c.id.startswith("load.")]
    assert loads and all(c.outcome == Outcome.SKIP for c in loads)
    assert "--load-s" in loads[0].message
