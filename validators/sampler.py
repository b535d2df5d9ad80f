"""Samples every GPU while part 2's load runs (the CUDA and collective smoke tests).

One sample format for every sampler and for snapshots (``compute/load.py``
``sample_once``: utilisation, SM and memory clocks, clock-event reasons, temperature,
power, current PCIe link), so the loaded-profile checks judge live samples and a
snapshot's recorded ones alike. Sampling errors end sampling for that GPU; they never
raise.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from imagectl.validators.compute.load import sample_once
from imagectl.validators.nvml.backend import NvmlBackend


class LoadSampler:
    def __init__(self, nvml: NvmlBackend, handles: list[object], interval_s: float = 0.5):
        self.nvml = nvml
        self.handles = handles
        self.interval_s = interval_s
        self.samples: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(handles))}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._dead: set[int] = set()

    def sample_once(self) -> None:
        for i, h in enumerate(self.handles):
            if i in self._dead or h is None:  # None: a GPU whose handle failed at init
                continue
            try:
                self.samples[i].append({"t": round(time.time(), 3), **sample_once(self.nvml, h)})
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
