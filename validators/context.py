"""What a check sees: the NVML backend, host facts, kernel log, expectations, thresholds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from imagectl.validators.catalogs import Thresholds, XidCatalog, thresholds, xid_catalog
from imagectl.validators.expectations import Expectations
from imagectl.validators.fabric.model import FabricSection, NcclRun
from imagectl.validators.fabric.nccl_probe import probe
from imagectl.validators.host.facts import LiveFacts, RecordedFacts
from imagectl.validators.host.kernel_log import KernelLog
from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.results import Action


class NamedCalls:
    """Proxy over a backend that tags each NVMLError with the call that raised it."""

    def __init__(self, backend: NvmlBackend):
        self._backend = backend
        self.kind = getattr(backend, "kind", "live")

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._backend, name)
        if not callable(fn):
            return fn

        def call(*args: object) -> object:
            try:
                return fn(*args)
            except pynvml.NVMLError as exc:
                if not hasattr(exc, "nvml_call"):
                    exc.nvml_call = name  # type: ignore[attr-defined]
                    exc.nvml_args = args  # type: ignore[attr-defined]
                raise

        return call


@dataclass
class Context:
    nvml: NvmlBackend
    facts: LiveFacts | RecordedFacts
    expect: Expectations
    profile: str
    kernel_log_loader: Callable[[], KernelLog]
    hygiene: bool = True
    history_dir: Path | None = None  # previous boots' receipts (--history)
    thresholds: Thresholds = field(default_factory=thresholds)
    xids: XidCatalog = field(default_factory=xid_catalog)
    # filled by the nvml.init check
    nvml_ready: bool = False
    nvml_error: BaseException | None = None
    nvml_problem: str = ""
    nvml_action: Action = Action.NONE
    nvml_init_s: float | None = None
    nvml_wedged: bool = False
    fabric_deadline: float | None = None  # boot readiness: wait for the fabric once per run
    # one entry per enumerated GPU; a GPU whose handle could not be opened has handle None
    # and its ``gpus`` entry carries ``error`` and ``action`` (the other GPUs are judged)
    handles: list[object] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    # samples taken under load (quick/full/burn), per GPU index
    load_samples: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # the GPU fabric as read (validators/fabric); the loader returns None when a replayed
    # snapshot has no fabric section
    fabric_loader: Callable[[], FabricSection | None] | None = None
    _kernel_log: KernelLog | None = None
    _fabric: FabricSection | None = None
    _fabric_read: bool = False
    _nccl_tried: bool = False

    def kernel_log(self) -> KernelLog:
        if self._kernel_log is None:
            self._kernel_log = self.kernel_log_loader()
        return self._kernel_log

    def fabric(self) -> FabricSection | None:
        """The fabric section, read once per run; None: not recorded (replay)."""
        if not self._fabric_read:
            self._fabric = self.fabric_loader() if self.fabric_loader is not None else None
            self._fabric_read = True
        return self._fabric

    def fabric_nccl(self) -> NcclRun | None:
        """The tiny NCCL run: the snapshot's in replay (None: not recorded); on a live host
        made once, when a check first asks (it is GPU work: quick, full, burn)."""
        section = self.fabric()
        if section is None:
            return None
        if section.nccl is None and self.facts.kind == "live" and not self._nccl_tried:
            self._nccl_tried = True
            section.nccl = probe()
        return section.nccl

    def fact(self, name: str) -> Any:
        return self.facts.get(name)

    def gpu_index_for_bus(self, bus: str) -> int | None:
        for g in self.gpus:
            if g.get("bus") == bus:
                return int(g["index"])
        return None
