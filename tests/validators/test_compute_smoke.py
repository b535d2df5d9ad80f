"""smoke_checks end to end on CPU, with and without an NVML replay sampled under load.

The replay implements the pynvml function surface (the protocol boundary), scripted per
GPU over time; the sampler, the CPU GEMM load and the judgement are the production code.
"""

from __future__ import annotations

import os
import threading
import types

import pytest

from imagectl.validators.compute import smoke_checks
from imagectl.validators.compute.cuda_init import init_check, probe
from imagectl.validators.compute.properties import properties_check
from imagectl.validators.expectations import Expectations, shape_fields
from imagectl.validators.results import Action, Outcome
from tests.support import ROOT

if os.environ.get("CI") != "true":
    pytest.importorskip("torch")


class NotSupported(Exception):
    """What pynvml raises for a function the GPU does not support."""


class ScriptedNvml:
    """pynvml surface; each GPU's figures may change after ``after`` reason reads."""

    def __init__(self, gpus):
        self.gpus = gpus
        self.reads = {i: 0 for i in gpus}
        self.lock = threading.Lock()

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def _value(self, handle, key):
        gpu = self.gpus[handle]
        late = gpu.get("late", {})
        if key in late and self.reads[handle] > gpu.get("after", 0):
            return late[key]
        if gpu.get(key, 0) is NotSupported:
            raise NotSupported(key)
        return gpu.get(key, 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        with self.lock:
            self.reads[handle] += 1
        return self._value(handle, "reasons")

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == 0  # NVML_TEMPERATURE_GPU
        return self._value(handle, "temp")

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._value(handle, "power_mw")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return self._value(handle, "gen")

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return self._value(handle, "width")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16


def by_id(checks):
    out = {}
    for c in checks:
        out.setdefault(c.id, []).append(c)
    return out


def test_cpu_quick_without_nvml():
    checks = by_id(smoke_checks(types.SimpleNamespace(), device="cpu", profile="quick", nvml=None))
    for dtype in ("bf16", "fp16", "fp32"):
        (gemm,) = checks[f"cuda.gemm.{dtype}"]
        assert gemm.outcome is Outcome.PASS and gemm.measured > 0 and gemm.unit == "TFLOP/s"
        assert gemm.details["floors"] == "not applicable on cpu"
        assert gemm.details["rel_error"] <= gemm.details["tolerance"]
    (hbm,) = checks["cuda.hbm_bandwidth"]
    assert hbm.outcome is Outcome.PASS and hbm.measured > 0 and hbm.expected is None
    for skipped in ("cuda.init", "cuda.h2d_bandwidth", "cuda.p2p_bandwidth", "load.clock_events"):
        assert checks[skipped][0].outcome is Outcome.SKIP and checks[skipped][0].message


def test_under_load_sampling_finds_power_brake_downtrained_link_and_heat():
    nvml = ScriptedNvml(
        {
            0: {"reasons": 0x4, "temp": 70, "power_mw": 650_000, "gen": 5, "width": 16},
            # GPU 1: fine at first, then power brake; link stuck at Gen4; runs hot.
            1: {
                "reasons": 0x0,
                "temp": 80,
                "power_mw": NotSupported,
                "gen": 4,
                "width": 16,
                "after": 1,
                "late": {"reasons": 0x80, "temp": 93},
            },
        }
    )
    expect = types.SimpleNamespace(gpu="H100-SXM-80GB", gpu_count=2, shape="p5.48xlarge")
    checks = by_id(smoke_checks(expect, device="cpu", profile="quick", nvml=nvml))
    events = {c.gpu: c for c in checks["load.clock_events"]}
    assert events[0].outcome is Outcome.PASS  # SW power cap (0x4) is normal
    assert events[0].details["rate_hz"] >= 2 and events[0].details["samples"] >= 2
    assert events[1].outcome is Outcome.FAIL and events[1].action is Action.DRAIN
    assert "hw_power_brake" in events[1].message
    links = {c.gpu: c for c in checks["load.pcie_link"]}
    assert links[0].outcome is Outcome.PASS and links[0].measured == "Gen5 x16"
    assert links[1].outcome is Outcome.FAIL and links[1].expected == "Gen5 x16"
    temps = {c.gpu: c for c in checks["load.temperature"]}
    assert temps[0].outcome is Outcome.PASS and temps[0].details["power_max_w"] == 650.0
    assert temps[1].outcome is Outcome.FAIL and temps[1].measured == 93
    assert temps[1].details["power_max_w"] is None  # unsupported reads are gaps, not crashes


def test_cuinit_probe_without_a_driver_fails_with_the_reason():
    tries = probe(2)
    assert len(tries) == 2 and all(t["rc"] is None for t in tries)
    check = init_check(tries, 8)
    assert check.outcome is Outcome.FAIL and check.action is Action.REBOOT
    assert "libcuda.so.1" in check.message


def test_cuinit_flaky_and_wrong_count():
    ok = {"rc": 0, "ms": 300.0, "devices": 8}
    flaky = init_check([ok, {"rc": 3, "ms": 5.0, "devices": -1}, ok], 8)
    assert flaky.outcome is Outcome.WARN and "1 of 3" in flaky.message
    assert init_check([ok, ok], 8).outcome is Outcome.PASS
    assert init_check([ok], 4).outcome is Outcome.FAIL


def test_properties_against_the_shape():
    """The model and memory are judged from the expectations' hardware table (what
    expect.json carries to the host), not from the controller's compat catalogue."""
    gib = 1 << 30
    dev = {"name": "NVIDIA H100 80GB HBM3", "total_memory": 79 * gib, "sm_count": 132}
    expect = Expectations(**shape_fields(ROOT / "images", "p5.48xlarge"))
    expect = expect.model_copy(update={"gpu_count": 2})
    assert expect.hardware is not None and expect.hardware.memory_gib == 80
    good = [dict(dev, index=0), dict(dev, index=1)]
    assert properties_check(good, expect).outcome is Outcome.PASS
    wrong = [dict(dev, index=0), dict(dev, index=1, name="NVIDIA H100 PCIe")]
    check = properties_check(wrong, expect)
    assert check.outcome is Outcome.FAIL and "GPU 1" in check.message
    assert properties_check(good[:1], expect).outcome is Outcome.FAIL
    small = [dict(dev, index=0, total_memory=40 * gib), dict(dev, index=1)]
    assert "40.0 GiB" in properties_check(small, expect).message
    # without a hardware table the count is still judged, the model is not
    bare = Expectations(gpu="H100-SXM-80GB", gpu_count=2)
    assert "model not checked" in properties_check(wrong, bare).message
