"""Snapshots: everything the checks read on a host, captured once and replayed offline.

A snapshot holds every NVML value per GPU (``nvml``, encoded as described in
``nvml/calls.py``), the host's software facts (``host``, see ``host/facts.py``) and the
NVIDIA-relevant lines of this boot's kernel log (``kernel_log``) and, when captured with
``--dcgm-level N``, one ``dcgmi diag -r N -j`` run (``dcgm``, judged in replay by
``validators/dcgm/``) and the GPU fabric as read (``fabric``: EFA / InfiniBand devices,
ports and counters, modules, ``fi_info``, a tiny NCCL run; ``validators/fabric/``). The
JSON Schema is
``schema/snapshot.schema.json`` (generated from ``Snapshot`` and kept in sync by a test).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from imagectl import __version__
from imagectl.core.errors import UserError
from imagectl.validators.compute.load import record_load
from imagectl.validators.compute.readiness import gather
from imagectl.validators.dcgm import record_diag
from imagectl.validators.fabric.capture import capture_fabric
from imagectl.validators.fabric.model import FABRIC_DOC, FabricSection
from imagectl.validators.host.boot_history import read_folder
from imagectl.validators.host.facts import LiveFacts, collect_all
from imagectl.validators.host.kernel_log import read_host_log, relevant_only
from imagectl.validators.jsonfile import STDIN, read_json
from imagectl.validators.nvml import LiveNvml
from imagectl.validators.nvml.capture import capture_nvml
from imagectl.validators.nvml.errors import known_error_names

SCHEMA_FILE = Path(__file__).parent / "schema" / "snapshot.schema.json"

NVML_DOC = (
    "NVML values. 'init.error' is null or an NVML_ERROR_* name without the prefix (e.g. "
    "LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED, LIB_RM_VERSION_MISMATCH). 'system' maps system "
    "calls (nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion_v2, "
    "nvmlDeviceGetCount) to values. 'common' holds values shared by all GPUs. 'devices' "
    "holds one object per GPU index mapping pynvml "
    "function names to return values; calls taking arguments after the handle map "
    "'arg1,arg2' (integers, pynvml constants) to values; structures are objects of their "
    'fields; a failing call is {"$error": "NOT_SUPPORTED"}; a call absent from the '
    "snapshot behaves as a function the driver lacks (FUNCTION_NOT_FOUND)."
)


class NvmlInit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: str | None = None


class NvmlSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    init: NvmlInit = Field(default_factory=NvmlInit)
    system: dict[str, Any] = Field(default_factory=dict)
    common: dict[str, object] = Field(
        default_factory=dict,
        description="values shared by every GPU, written once; a device's own entry wins",
    )
    devices: list[dict[str, Any]] = Field(default_factory=list)


class KernelLogSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str = "snapshot"
    error: str | None = None
    filtered: bool = True
    text: str = ""


class DcgmSection(BaseModel):
    """One ``dcgmi diag -r <level> -j`` run as it happened (``validators/dcgm/run.py``)."""

    model_config = ConfigDict(extra="forbid")
    level: int = Field(ge=1, le=4, description="the -r run level")
    dcgmi: str | None = Field(default=None, description="path of dcgmi; null: not found")
    argv: list[str] | None = Field(default=None, description="the command; null: not started")
    exit_code: int | None = Field(
        default=None, description="exit status; negative: killed by that signal"
    )
    timed_out: bool = Field(default=False, description="the hard timeout fired")
    timeout_s: float | None = None
    duration_s: float = 0.0
    stdout: str = Field(default="", description="stdout as printed (DCGM's JSON, or not)")
    stderr_tail: str = ""
    error: str | None = Field(default=None, description="why dcgmi could not be started")


class LoadGpu(BaseModel):
    """One GPU's samples under load (``compute/load.py`` ``Sampler.recording``)."""

    model_config = ConfigDict(extra="forbid")
    index: int = Field(ge=0)
    sm_max_mhz: int | None = Field(default=None, description="nvmlDeviceGetMaxClockInfo(SM)")
    mem_max_mhz: int | None = Field(default=None, description="nvmlDeviceGetMaxClockInfo(MEM)")
    slowdown_c: int | None = Field(default=None, description="NVML slowdown temperature")
    start: dict[str, Any] = Field(
        default_factory=dict,
        description="counters when the load started: t, ecc_uncorrected, ecc_corrected "
        "(volatile), pcie_replay",
    )
    end: dict[str, Any] = Field(default_factory=dict, description="the same when it ended")
    samples: list[dict[str, Any]] = Field(
        default_factory=list,
        description="t, util (%), sm_mhz, mem_mhz, reasons (clock-event mask), temp_c, "
        "power_w, pcie_gen, pcie_width; null where NVML could not say",
    )


class LoadSection(BaseModel):
    """The samples taken while every GPU ran the GEMM load (judged in replay by
    ``compute/recorded.py``: every ``load.*`` check, and the ``gpu.load.*`` ones)."""

    model_config = ConfigDict(extra="forbid")
    load_s: float = Field(ge=0, description="the load asked for")
    interval_s: float = Field(gt=0)
    duration_s: float = Field(ge=0, description="sampled time, start to end counters")
    gpus: list[LoadGpu]


DCGM_DOC = (
    "NVIDIA DCGM diagnostics: one `dcgmi diag -r <level> -j` run (argv, exit code, stdout as "
    "printed, stderr tail, duration, timeout, or why it could not run). Absent: not captured; "
    "replay then skips the DCGM checks."
)


class Snapshot(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    kind: Literal["imagectl.snapshot"] = "imagectl.snapshot"
    description: str = ""
    captured_at: str | None = None
    validator_version: str | None = None
    nvml: NvmlSection = Field(description=NVML_DOC)
    host: dict[str, Any] = Field(
        description="host facts by name (hostname, kernel_release, os_release, boot, "
        "nvidia_module, nvml_library, nccl, packages, services, manifest, cloud_image, hygiene)"
    )
    # not recorded: replayed as a log that cannot be read (kernel.xid fails), never as a
    # clean one
    kernel_log: KernelLogSection = Field(
        default_factory=lambda: KernelLogSection(
            source="none", error="the snapshot has no kernel_log section (not recorded)"
        )
    )
    cuda: dict[str, Any] | None = Field(
        default=None,
        description="readiness for the GPU work (validators/compute/readiness.py gather()): "
        "toolkit {installed, version, cuda, path, error}, device_nodes, nvidiactl, uvm "
        "{loaded, node}, cuinit [{rc, ms, devices} | {rc: null, error}]; null: not recorded",
    )
    dcgm: DcgmSection | None = Field(default=None, description=DCGM_DOC)
    load: LoadSection | None = Field(
        default=None,
        description="samples under load (SM/memory clocks and maxima, clock-event reasons, "
        "temperature, power, PCIe link, ECC and replay counters at start and end); null: "
        "not captured (replay then skips the load.* checks)",
    )
    fabric: FabricSection | None = Field(default=None, description=FABRIC_DOC)

    @field_validator("nvml")
    @classmethod
    def _devices(cls, v: NvmlSection) -> NvmlSection:
        known = set(known_error_names())
        if v.init.error is not None and v.init.error not in known:
            raise ValueError(f"init.error '{v.init.error}' is not an NVML error name")
        return v


def factor_common(nvml: dict[str, Any]) -> dict[str, Any]:
    """Move values identical on every GPU into ``common`` (smaller, easier to read)."""
    devices = [d for d in nvml.get("devices") or [] if "$error" not in d]
    if len(devices) < 2:
        return nvml
    common = {k: v for k, v in devices[0].items() if all(k in d and d[k] == v for d in devices[1:])}
    out = dict(nvml)
    out["common"] = {**nvml.get("common", {}), **common}
    out["devices"] = [
        d if "$error" in d else {k: v for k, v in d.items() if k not in common}
        for d in nvml["devices"]
    ]
    return out


def snapshot_schema() -> dict[str, Any]:
    schema = Snapshot.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://imagectl.dev/schemas/snapshot-v1.json"
    schema["title"] = "imagectl host snapshot, version 1"
    return schema


def load_snapshot(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    data = read_json(path, "snapshot", "Capture a new one with `imagectl snapshot -o FILE`")
    try:
        snap = Snapshot.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(
            f"not a valid snapshot: {loc}: {first['msg']}",
            where=STDIN if str(path) == "-" else str(path),
            hint="Snapshots follow imagectl/validators/schema/snapshot.schema.json",
        ) from exc
    return snap.model_dump(mode="json")


def boot_history_fact(folder: Path) -> list[dict[str, Any]]:
    """Previous boots' receipts, reduced to what the recurrence rule reads (their boot,
    start, GPUs and kernel.xid results): no user's file paths, no other check."""
    receipts, _unreadable = read_folder(folder)
    return [
        {
            "kind": r.get("kind"),
            "host": {"boot": (r.get("host") or {}).get("boot")},
            "started_at": r.get("started_at"),
            "gpus": r.get("gpus") or [],
            "checks": [c for c in r.get("checks") or [] if c.get("id") == "kernel.xid"],
        }
        for _, r in receipts
    ]


def capture(
    *,
    root: str = "/",
    extra_packages: tuple[str, ...] = (),
    description: str = "",
    cuinit_tries: int = 3,
    dcgm_level: int | None = None,
    history_dir: Path | None = None,
    load_s: float | None = None,
    fabric_interval_s: float = 2.0,
    nccl_probe: bool = True,
) -> dict[str, Any]:
    """Capture this host: NVML (walking calls.py), host facts, the kernel log, the
    readiness for GPU work (the validator's toolkit, cuInit in fresh processes) and, with
    ``dcgm_level``, a ``dcgmi diag`` run (validators/dcgm); with ``history_dir``, the
    previous boots' receipts (their XIDs) as the host fact ``boot_history``. The fabric
    (validators/fabric) is read with its port counters twice ``fabric_interval_s`` apart
    and, with ``nccl_probe`` on a host with GPUs, a tiny NCCL run."""
    snap = Snapshot(
        description=description,
        captured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        validator_version=__version__,
        nvml=NvmlSection.model_validate(factor_common(capture_nvml(LiveNvml()))),
        host=collect_all(LiveFacts(root=root, extra_packages=extra_packages)),
        kernel_log=KernelLogSection.model_validate(relevant_only(read_host_log()).to_dict()),
        cuda=gather(cuinit_tries),
    )
    gpus = len(snap.nvml.devices)
    snap.fabric = capture_fabric(interval_s=fabric_interval_s, nccl=nccl_probe and gpus > 0)
    if history_dir is not None:
        snap.host["boot_history"] = boot_history_fact(history_dir)
    if load_s:  # GEMM load on every GPU while NVML is sampled (needs torch and CUDA)
        snap.load = LoadSection.model_validate(record_load(LiveNvml(), load_s))
    if dcgm_level is not None:  # NVIDIA's own diagnostics, judged in replay (validators/dcgm)
        snap.dcgm = DcgmSection.model_validate(record_diag(dcgm_level))
    return snap.model_dump(mode="json")
