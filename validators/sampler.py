"""Samples clock events, temperature, power and PCIe link per GPU while load runs.

Used around the part-2 smoke tests in quick/full/burn so that hardware is judged under
load, not only at idle. Sampling errors end sampling for that GPU; they never raise.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from imagectl.validators.nvml.calls import TEMP_GPU, THRESHOLD_SLOWDOWN


class LoadSampler:
    def __init__(self, nvml: Any, handles: list[Any], interval_s: float = 0.5):
        self.nvml = nvml
        self.handles = handles
        self.interval_s = interval_s
        self.samples: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(handles))}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._dead: set[int] = set()

    def sample_once(self) -> None:
        n = self.nvml
        for i, h in enumerate(self.handles):
            if i in self._dead or h is None:  # None: a GPU whose handle failed at init
                continue
            try:
                self.samples[i].append(
                    {
                        "t": time.time(),
                        "util": int(n.nvmlDeviceGetUtilizationRates(h).gpu),
                        "clock_events": int(n.nvmlDeviceGetCurrentClocksEventReasons(h)),
                        "temp": int(n.nvmlDeviceGetTemperature(h, TEMP_GPU)),
                        "slowdown": int(n.nvmlDeviceGetTemperatureThreshold(h, THRESHOLD_SLOWDOWN)),
                        "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                        "pcie_gen": int(n.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                        "pcie_width": int(n.nvmlDeviceGetCurrPcieLinkWidth(h)),
                    }
                )
            except Exception:
                self._dead.add(i)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.interval_s)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.interval_s * 4)
