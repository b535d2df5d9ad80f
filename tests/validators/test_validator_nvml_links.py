"""Classes 6-8: consistency against the SKU and across GPUs, NVLink as DCGM's health watch
judges it, and the NVLink fabric (health mask; v1 and v2 structure layouts).

Sources: DCGM DcgmHealthWatch MonitorNVLink and dcgm_gpu_hardware_limits.h (replay and
recovery fail at 1, CRC at 100 per second); nvml.h / pynvml (nvmlNvLinkState_t,
NVML_GPU_FABRIC_HEALTH_MASK_*, c_nvmlGpuFabricInfo_t and _v2_t); images/compat/gpus.yaml
nvml_memory_mib with its sources.
"""

from __future__ import annotations

import copy
from typing import Any

import pynvml
import pytest
from validator_support import SNAPSHOTS, expect_file

from imagectl.validators.checks import REGISTRY
from imagectl.validators.compute.checks import load_checks
from imagectl.validators.compute.load import summarise
from imagectl.validators.expectations import from_file
from imagectl.validators.nvml import ReplayNvml
from imagectl.validators.nvml.calls import NVLINK_COUNTERS
from imagectl.validators.nvml.fabric import read_fabric
from imagectl.validators.results import Action, CheckResult, Outcome, Severity
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot


def _snap(base: str) -> dict[str, Any]:
    snap = copy.deepcopy(load_snapshot(SNAPSHOTS / f"healthy/{base}.json"))
    common = snap["nvml"].pop("common", {})
    snap["nvml"]["devices"] = [copy.deepcopy({**common, **d}) for d in snap["nvml"]["devices"]]
    return snap


def _judge(snap: dict[str, Any], base: str, *ids: str) -> dict[tuple[str, int | None], Any]:
    ctx = build_context(Options(expect=from_file(expect_file(base)), snapshot=snap))
    results = run_checks([REGISTRY["nvml.init"], *(REGISTRY[i] for i in ids)], ctx)
    return {(r.id, r.gpu): r for r in results}


# -- NVLink --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uptime_s", "outcome"),
    [(300.0, Outcome.WARN), (1.0, Outcome.FAIL), (1.5, Outcome.FAIL), (2.0, Outcome.WARN)],
)
def test_crc_errors_are_judged_as_a_rate_per_second(uptime_s: float, outcome: Outcome) -> None:
    """150 CRC flit errors: 0.5/s over 300 s warns; 150/s and 100/s fail; 75/s warns."""
    snap = _snap("h100-sxm-8x")
    snap["host"]["boot"]["uptime_s"] = uptime_s
    key = f"4,{NVLINK_COUNTERS['crc_flit']}"
    snap["nvml"]["devices"][1]["nvmlDeviceGetNvLinkErrorCounter"][key] = 150
    r = _judge(snap, "h100-sxm-8x", "gpu.nvlink.errors")[("gpu.nvlink.errors", 1)]
    assert r.outcome == outcome
    assert r.details["crc_per_s_worst_link"] == pytest.approx(150 / uptime_s, rel=1e-3)
    if outcome == Outcome.FAIL:
        assert r.action == Action.RESET_GPU and r.severity == Severity.CRITICAL


@pytest.mark.parametrize("counter", ["replay", "recovery"])
def test_one_replay_or_recovery_error_fails(counter: str) -> None:
    snap = _snap("a100-sxm-80gb-8x")
    snap["host"]["boot"]["uptime_s"] = 86400.0  # a day: any rate rule would let it pass
    key = f"11,{NVLINK_COUNTERS[counter]}"
    snap["nvml"]["devices"][3]["nvmlDeviceGetNvLinkErrorCounter"][key] = 1
    res = _judge(snap, "a100-sxm-80gb-8x", "gpu.nvlink.errors")
    r = res[("gpu.nvlink.errors", 3)]
    assert r.outcome == Outcome.FAIL and r.action == Action.RESET_GPU
    assert r.measured[counter] == 1
    assert res[("gpu.nvlink.errors", 2)].outcome == Outcome.PASS


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        (pynvml.NVML_NVLINK_STATE_ACTIVE, Outcome.PASS),
        (pynvml.NVML_NVLINK_STATE_SLEEP, Outcome.PASS),
        (pynvml.NVML_NVLINK_STATE_INACTIVE, Outcome.FAIL),
        (pynvml.NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED, Outcome.FAIL),
    ],
)
def test_link_states(state: int, outcome: Outcome) -> None:
    snap = _snap("h200-8x")
    for link in (0, 9, 17):
        snap["nvml"]["devices"][4]["nvmlDeviceGetNvLinkState"][str(link)] = state
    r = _judge(snap, "h200-8x", "gpu.nvlink.active")[("gpu.nvlink.active", 4)]
    assert r.outcome == outcome
    if outcome == Outcome.FAIL:
        assert r.details["inactive"] == [0, 9, 17] and r.measured == 15


# -- fabric --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shift", "value", "action"),
    [
        (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW, 1, Action.DRAIN),
        (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY, 1, Action.REBOOT),
        (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY, 1, Action.REBOOT),
        (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY, 1, Action.REBOOT),
        (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION, 6, Action.DRAIN),
        (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE, 2, Action.REBOOT),
    ],
)
def test_fabric_health_mask_bits_fail(shift: int, value: int, action: Action) -> None:
    snap = _snap("h100-sxm-8x")
    dev = snap["nvml"]["devices"][7]
    mask = dev["nvmlDeviceGetGpuFabricInfoV"]["healthMask"]
    width = 0xF if shift == 8 else 0x3
    dev["nvmlDeviceGetGpuFabricInfoV"]["healthMask"] = (mask & ~(width << shift)) | (value << shift)
    res = _judge(snap, "h100-sxm-8x", "gpu.fabric.state")
    r = res[("gpu.fabric.state", 7)]  # state COMPLETED and status success: the mask decides
    assert r.outcome == Outcome.FAIL and r.action == action
    assert r.details["layout"] == "v2"
    assert res[("gpu.fabric.state", 6)].outcome == Outcome.PASS


def test_a_mask_of_not_supported_fields_passes() -> None:
    snap = _snap("h100-sxm-8x")
    snap["nvml"]["devices"][0]["nvmlDeviceGetGpuFabricInfoV"]["healthMask"] = 0
    r = _judge(snap, "h100-sxm-8x", "gpu.fabric.state")[("gpu.fabric.state", 0)]
    assert r.outcome == Outcome.PASS


def test_v1_and_v2_structures_are_read_with_their_own_layouts() -> None:
    snap = _snap("h200-8x")
    dev = snap["nvml"]["devices"][0]
    dev["nvmlDeviceGetGpuFabricInfo"]["state"] = pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS
    dev["nvmlDeviceGetGpuFabricInfo"]["cliqueId"] = 7
    nvml = ReplayNvml(snap["nvml"])
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    v2 = read_fabric(nvml, h)
    assert (v2.layout, v2.state, v2.clique_id) == ("v2", "COMPLETED", 32766)
    assert v2.health_mask == dev["nvmlDeviceGetGpuFabricInfoV"]["healthMask"]
    del dev["nvmlDeviceGetGpuFabricInfoV"]  # an older driver: only the v1 call
    nvml = ReplayNvml(snap["nvml"])
    nvml.nvmlInit()
    v1 = read_fabric(nvml, nvml.nvmlDeviceGetHandleByIndex(0))
    assert (v1.layout, v1.state, v1.clique_id, v1.health_mask) == ("v1", "IN_PROGRESS", 7, None)


def test_replay_is_as_strict_as_the_c_library_about_layouts() -> None:
    """A v1 buffer to ...InfoV is a version mismatch; a v2 buffer to the v1 call is read
    four bytes off, exactly as the C library's write would land."""
    snap = _snap("h100-sxm-8x")
    nvml = ReplayNvml(snap["nvml"])
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nvml.nvmlDeviceGetGpuFabricInfoV(h, pynvml.c_nvmlGpuFabricInfo_t())
    wrong = pynvml.c_nvmlGpuFabricInfo_v2_t()
    nvml.nvmlDeviceGetGpuFabricInfo(h, wrong)
    assert wrong.state != pynvml.NVML_GPU_FABRIC_STATE_COMPLETED  # misread
    right = pynvml.c_nvmlGpuFabricInfo_t()
    nvml.nvmlDeviceGetGpuFabricInfo(h, right)
    assert right.state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED


# -- consistency ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "mib", "outcome"),
    [
        ("h100-sxm-8x", 81559, Outcome.PASS),
        ("h100-sxm-8x", 81559 - 400, Outcome.PASS),  # within 1%
        ("h100-sxm-8x", 67 * 1024, Outcome.FAIL),  # the old 90%-of-GB-or-GiB rule passed it
        ("h100-sxm-8x", 77463, Outcome.FAIL),  # 4 GiB short
        ("h200-8x", 143771 - 2048, Outcome.FAIL),
        ("l4-1x", 22010, Outcome.FAIL),
    ],
)
def test_memory_against_the_skus_nvml_total(base: str, mib: int, outcome: Outcome) -> None:
    snap = _snap(base)
    snap["nvml"]["devices"][0]["nvmlDeviceGetMemoryInfo"]["total"] = mib * 2**20
    r = _judge(snap, base, "gpu.memory")[("gpu.memory", 0)]
    assert r.outcome == outcome
    assert "images/compat/gpus.yaml" in (r.source or "")
    if outcome == Outcome.FAIL:
        assert r.action == Action.ISOLATE_RMA


def test_vbios_and_power_limit_against_peers() -> None:
    snap = _snap("a100-sxm-80gb-8x")
    snap["nvml"]["devices"][5]["nvmlDeviceGetVbiosVersion"] = "92.00.19.00.01"
    snap["nvml"]["devices"][6]["nvmlDeviceGetEnforcedPowerLimit"] = 300_000
    res = _judge(snap, "a100-sxm-80gb-8x", "gpu.inforom", "gpu.power.limit")
    v = res[("gpu.inforom", 5)]
    assert v.outcome == Outcome.FAIL and v.action == Action.DRAIN
    assert v.expected == {"vbios": "92.00.45.00.06"}
    assert res[("gpu.inforom", 4)].outcome == Outcome.PASS
    p = res[("gpu.power.limit", 6)]
    assert p.outcome == Outcome.FAIL and p.action == Action.REBOOT


def test_current_pcie_width_at_boot_speed_may_drop() -> None:
    snap = _snap("h100-sxm-8x")
    devs = snap["nvml"]["devices"]
    devs[3]["nvmlDeviceGetCurrPcieLinkWidth"] = 4
    devs[4]["nvmlDeviceGetCurrPcieLinkGeneration"] = 1  # idle: speed drops, width stays
    res = _judge(snap, "h100-sxm-8x", "gpu.pcie.link_max")
    r = res[("gpu.pcie.link_max", 3)]
    assert r.outcome == Outcome.FAIL and r.action == Action.DRAIN and r.measured == "x4"
    assert res[("gpu.pcie.link_max", 4)].outcome == Outcome.PASS


def test_under_load_every_sample_is_judged_not_the_best() -> None:
    good = {"reasons": 0, "temp_c": 60, "power_w": 500.0, "pcie_gen": 5, "pcie_width": 16}
    samples = [{"t": i * 0.25, **good} for i in range(8)]
    samples[5] = {**samples[5], "pcie_gen": 5, "pcie_width": 8}  # one narrow sample
    want = {"gen": 5, "width": 16, "source": "images/catalog/shapes.yaml"}

    def judged(s: list[dict[str, Any]]) -> CheckResult:
        results = load_checks(
            {0: summarise(s)},
            pcie={0: want},
            max_temp=None,
            min_rate_hz=2.0,
            rates={0: 4.0},
            load_s=2.0,
        )
        return next(r for r in results if r.id == "load.pcie_link")

    r = judged(samples)
    assert r.outcome == Outcome.FAIL and r.measured == "Gen5 x8"
    assert r.details["samples_below"] == 1 and r.details["samples"] == 8
    assert judged([{"t": 0.0, **good}] * 8).outcome == Outcome.PASS


def test_power_limit_against_the_boards_default_without_a_shape() -> None:
    """No power limit in the shape, one GPU: NVML's default limit is the SKU's own figure."""
    snap = _snap("l4-1x")
    snap["nvml"]["devices"][0]["nvmlDeviceGetEnforcedPowerLimit"] = 60_000
    expect = from_file(expect_file("l4-1x"))
    assert expect.hardware is not None
    hw = expect.hardware.model_copy(update={"power_limit_w": None})
    ctx = build_context(Options(expect=expect.model_copy(update={"hardware": hw}), snapshot=snap))
    res = {
        (r.id, r.gpu): r
        for r in run_checks([REGISTRY["nvml.init"], REGISTRY["gpu.power.limit"]], ctx)
    }
    r = res[("gpu.power.limit", 0)]
    assert r.outcome == Outcome.FAIL and r.action == Action.REBOOT
    assert "DefaultLimit" in (r.source or "")
