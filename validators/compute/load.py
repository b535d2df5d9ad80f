"""Hardware under load: sample NVML while every device runs GEMMs, then judge the samples.

A thread polls each GPU at ``interval_s`` (4 Hz by default; the issue asks for >= 2 Hz):
clock-event reasons, temperature, power and the current PCIe link. ``nvml`` is any object
with the pynvml function surface (live pynvml or the validator's replay). Judgement:

- HW slowdown (0x8), HW thermal (0x40) or HW power brake (0x80) in any sample fails
  (Autopilot, gpud: these under load are faults; SW power cap and idle are normal);
- SW thermal slowdown (0x20) warns;
- every sample's PCIe link is judged: one sample under load below the expected
  generation or width fails (links downtrain at idle, so only a loaded link is judged,
  and a link that flaps between samples is a fault, not hidden by its best sample);
- temperature above the floors table's maximum fails.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict

from imagectl.validators.nvml.backend import NvmlBackend

if TYPE_CHECKING:
    from torch import device as TorchDevice

HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
FATAL_REASONS = {
    HW_SLOWDOWN: "hw_slowdown",
    HW_THERMAL: "hw_thermal",
    HW_POWER_BRAKE: "hw_power_brake",
}
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0


def _call(nvml: object, names: tuple[str, ...], *args: object) -> Any:
    """Call the first function of ``names`` the backend has; None when unsupported."""
    for name in names:
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        try:
            return fn(*args)
        except Exception:  # NVMLError_NotSupported and friends: no figure, not a crash
            return None
    return None


def sample_once(nvml: NvmlBackend, handle: object) -> dict[str, object]:
    """One sample: utilisation, SM and memory clocks, clock-event reasons, temperature,
    power and the current PCIe link (None where NVML cannot say)."""
    power_mw = _call(nvml, ("nvmlDeviceGetPowerUsage",), handle)
    util = _call(nvml, ("nvmlDeviceGetUtilizationRates",), handle)
    return {
        "util": getattr(util, "gpu", None),
        "sm_mhz": _call(nvml, ("nvmlDeviceGetClockInfo",), handle, NVML_CLOCK_SM),
        "mem_mhz": _call(nvml, ("nvmlDeviceGetClockInfo",), handle, NVML_CLOCK_MEM),
        "reasons": _call(
            nvml,
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            handle,
        ),
        "temp_c": _call(nvml, ("nvmlDeviceGetTemperature",), handle, NVML_TEMPERATURE_GPU),
        "power_w": None if power_mw is None else power_mw / 1000.0,
        "pcie_gen": _call(nvml, ("nvmlDeviceGetCurrPcieLinkGeneration",), handle),
        "pcie_width": _call(nvml, ("nvmlDeviceGetCurrPcieLinkWidth",), handle),
    }


def maxima(nvml: NvmlBackend, handle: object) -> dict[str, object]:
    """What the samples are judged against, read once: the clocks' maxima and the GPU's
    slowdown temperature."""
    return {
        "sm_max_mhz": _call(nvml, ("nvmlDeviceGetMaxClockInfo",), handle, NVML_CLOCK_SM),
        "mem_max_mhz": _call(nvml, ("nvmlDeviceGetMaxClockInfo",), handle, NVML_CLOCK_MEM),
        "slowdown_c": _call(
            nvml,
            ("nvmlDeviceGetTemperatureThreshold",),
            handle,
            NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
        ),
    }


def counters(nvml: NvmlBackend, handle: object) -> dict[str, object]:
    """Counters read at the start and at the end of the load: volatile ECC (uncorrected,
    corrected) and the PCIe replay counter; their rise over the load is judged as a rate."""
    ecc = ("nvmlDeviceGetTotalEccErrors",)
    return {
        "t": round(time.time(), 3),
        "ecc_uncorrected": _call(
            nvml, ecc, handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
        ),
        "ecc_corrected": _call(
            nvml, ecc, handle, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC
        ),
        "pcie_replay": _call(nvml, ("nvmlDeviceGetPcieReplayCounter",), handle),
    }


@dataclass
class Sampler:
    nvml: NvmlBackend
    indices: list[int]
    interval_s: float = 0.25
    samples: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    started: float = 0.0
    stopped: float = 0.0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self.handles = {i: self.nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
        self.samples = {i: [] for i in self.indices}
        self.maxima = {i: maxima(self.nvml, h) for i, h in self.handles.items()}
        self.start: dict[int, dict[str, object]] = {}
        self.end: dict[int, dict[str, object]] = {}

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            for index, handle in self.handles.items():
                self.samples[index].append(
                    {"t": round(now - self.started, 3), **sample_once(self.nvml, handle)}
                )
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def __enter__(self) -> Sampler:
        self.start = {i: counters(self.nvml, h) for i, h in self.handles.items()}
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.stopped = time.monotonic()
        self.end = {i: counters(self.nvml, h) for i, h in self.handles.items()}

    def recording(self, load_s: float) -> dict[str, object]:
        """The samples as a snapshot's ``load`` section records them (validators/snapshot.py
        LoadSection), judged in replay by the same code (``judge_recording``)."""
        return {
            "load_s": load_s,
            "interval_s": self.interval_s,
            "duration_s": round(max(self.stopped - self.started, 0.0), 3),
            "gpus": [
                {
                    "index": i,
                    **self.maxima[i],
                    "start": self.start.get(i, {}),
                    "end": self.end.get(i, {}),
                    "samples": self.samples[i],
                }
                for i in self.indices
            ],
        }

    def rate_hz(self, index: int) -> float:
        span = max(self.stopped - self.started, 1e-9)
        return len(self.samples[index]) / span


def gemm_load(
    torch: ModuleType, devices: list[TorchDevice], seconds: float, n: int
) -> dict[str, int]:
    """Keep every device busy with bf16 GEMMs for ``seconds``; returns GEMMs run per device."""
    dtype = torch.bfloat16 if devices[0].type == "cuda" else torch.float32
    mats = [
        (torch.randn(n, n, device=d, dtype=dtype), torch.randn(n, n, device=d, dtype=dtype))
        for d in devices
    ]
    outs = [torch.empty(n, n, device=d, dtype=dtype) for d in devices]
    counts = {str(d): 0 for d in devices}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for dev, (a, b), c in zip(devices, mats, outs, strict=True):
            for _ in range(4):  # launches are asynchronous on CUDA: queue a few per device
                torch.matmul(a, b, out=c)
            counts[str(dev)] += 4
        for dev in devices:
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
    return counts


class LoadSummary(TypedDict):
    """One GPU's figures over its samples under load (``summarise``)."""

    samples: int
    reasons: dict[str, int]
    first_seen_s: dict[str, float]
    reasons_supported: bool
    temp_max_c: float | None
    power_max_w: float | None
    power_mean_w: float | None
    pcie_links: list[tuple[int, int]]
    pcie_unread: int
    pcie_gen_min: int | None
    pcie_width_min: int | None


def summarise(samples: list[dict[str, Any]]) -> LoadSummary:
    """Per-GPU figures from its samples: reason counts, max temperature/power, every link."""
    reasons: dict[str, int] = {}
    first_seen: dict[str, float] = {}
    for s in samples:
        bits = s.get("reasons")
        if bits is None:
            continue
        for bit, name in {**FATAL_REASONS, SW_THERMAL: "sw_thermal"}.items():
            if bits & bit:
                reasons[name] = reasons.get(name, 0) + 1
                first_seen.setdefault(name, s["t"])
    temps = [s["temp_c"] for s in samples if s.get("temp_c") is not None]
    powers = [s["power_w"] for s in samples if s.get("power_w") is not None]
    links = [
        (int(s["pcie_gen"]), int(s["pcie_width"]))
        for s in samples
        if s.get("pcie_gen") is not None and s.get("pcie_width") is not None
    ]
    return {
        "samples": len(samples),
        "reasons": reasons,
        "first_seen_s": first_seen,
        "reasons_supported": any(s.get("reasons") is not None for s in samples),
        "temp_max_c": max(temps) if temps else None,
        "power_max_w": max(powers) if powers else None,
        "power_mean_w": round(sum(powers) / len(powers), 1) if powers else None,
        # every sample's link (gen, width), judged one by one; the worst for the report
        "pcie_links": links,
        "pcie_unread": len(samples) - len(links),
        "pcie_gen_min": min(g for g, _ in links) if links else None,
        "pcie_width_min": min(w for _, w in links) if links else None,
    }


def record_load(
    nvml: NvmlBackend, seconds: float, interval_s: float = 0.25, n: int = 8192
) -> dict[str, object]:
    """``imagectl snapshot --load-s N``: bf16 GEMMs on every CUDA device for ``seconds``
    while NVML is sampled; the recording a snapshot's ``load`` section holds."""
    import torch

    nvml.nvmlInit()
    try:
        devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
        if not devices:
            raise RuntimeError("no CUDA device: nothing to load")
        sampler = Sampler(nvml, list(range(len(devices))), interval_s=interval_s)
        with sampler:
            gemm_load(torch, devices, seconds, n)
        return sampler.recording(seconds)
    finally:
        nvml.nvmlShutdown()
