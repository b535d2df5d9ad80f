"""Inventory: NVML initialises; GPU count, model, memory, UUIDs; MIG, compute mode,
persistence; VBIOS and InfoROM."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import pynvml

import imagectl.images
from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip
from imagectl.validators.host.kernel_log import normalise_bus
from imagectl.validators.nvml.errors import error_label, error_name
from imagectl.validators.nvml.policy import nvml_policy
from imagectl.validators.nvml.unsupported import peers_answering
from imagectl.validators.results import Action
from imagectl.validators.shapes import gpu_rows

SHAPES = "images/catalog/shapes.yaml"
GPUS = "images/compat/gpus.yaml"


def _init_failure(ctx: Context, exc: BaseException) -> tuple[Action, str]:
    name = error_name(exc)
    if name == "LIBRARY_NOT_FOUND":
        return (
            Action.BLOCK_IMAGE,
            "libnvidia-ml.so.1 not found: the NVIDIA driver user-space is not installed "
            "in this image",
        )
    if name == "DRIVER_NOT_LOADED":
        module = _safe_fact(ctx, "nvidia_module") or {}
        if module.get("installed"):
            return (
                Action.REBOOT,
                "the nvidia kernel module is installed but not loaded; reboot, then check "
                "`dmesg` for the module's load error",
            )
        return (
            Action.BLOCK_IMAGE,
            "the nvidia kernel module is not loaded and none is installed for the running "
            "kernel (DKMS build missing or a kernel the image did not pin)",
        )
    if name == "LIB_RM_VERSION_MISMATCH":
        return (
            Action.REBOOT,
            "Driver/library version mismatch: the user-space NVML does not match the loaded "
            "kernel module (driver upgraded without a reboot)",
        )
    if name == "NO_PERMISSION":
        return Action.NONE, "no permission to use NVML: run the validator as root"
    return Action.REBOOT, "NVML failed to initialise"


def _safe_fact(ctx: Context, name: str) -> Any:
    try:
        return ctx.fact(name)
    except Exception:
        return None


@check("nvml.init", "NVML initialises and enumerates the GPUs", needs_nvml=True, timeout_s=20.0)
def nvml_init(ctx: Context) -> Finding | list[Finding]:
    started = time.perf_counter()
    try:
        ctx.nvml.nvmlInit()
    except pynvml.NVMLError as exc:
        ctx.nvml_error = exc
        ctx.nvml_action, why = _init_failure(ctx, exc)
        ctx.nvml_problem = f"{error_label(exc)}: {why}"
        return bad(
            ctx.nvml_action,
            ctx.nvml_problem,
            measured=error_name(exc),
            expected="NVML_SUCCESS",
            details={"nvml_error": error_name(exc)},
        )
    try:
        count = ctx.nvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        rule = nvml_policy().error(error_name(exc))
        ctx.nvml_error = exc
        ctx.nvml_action = rule.action if not rule.skip else Action.REBOOT
        ctx.nvml_problem = f"nvmlDeviceGetCount failed: {error_label(exc)}"
        return bad(
            ctx.nvml_action,
            ctx.nvml_problem,
            measured=error_name(exc),
            expected="NVML_SUCCESS",
            source=rule.source,
            details={"nvml_error": error_name(exc)},
        )
    handles: list[object] = []
    gpus: list[dict[str, Any]] = []
    lost: list[Finding] = []
    for i in range(count):
        try:
            h = ctx.nvml.nvmlDeviceGetHandleByIndex(i)
            pci = ctx.nvml.nvmlDeviceGetPciInfo_v3(h)
            entry: dict[str, Any] = {
                "index": i,
                "name": ctx.nvml.nvmlDeviceGetName(h),
                "uuid": ctx.nvml.nvmlDeviceGetUUID(h),
                "bus": normalise_bus(pci.busId),
                "pci_bus_id": pci.busId,
                "arch": _arch_of(ctx, h),
            }
        except pynvml.NVMLError as exc:
            # one GPU that cannot be opened fails alone; the others are judged as usual
            rule = nvml_policy().error(error_name(exc))
            action = rule.action if not rule.skip else Action.REBOOT
            handles.append(None)
            gpus.append({"index": i, "error": error_name(exc), "action": action})
            lost.append(
                bad(
                    action,
                    f"GPU {i} cannot be opened: {getattr(exc, 'nvml_call', 'NVML')} failed with "
                    f"{error_label(exc)}",
                    measured=error_name(exc),
                    expected="NVML_SUCCESS",
                    source=rule.source,
                    gpu=i,
                    details={"nvml_error": error_name(exc), "root_cause": "nvml.handle"},
                )
            )
            continue
        handles.append(h)
        gpus.append(entry)
    ctx.nvml_init_s = time.perf_counter() - started
    ctx.handles, ctx.gpus, ctx.nvml_ready = handles, gpus, True
    return [
        ok(
            f"{count} GPU(s) in {ctx.nvml_init_s * 1000:.0f} ms",
            measured=round(ctx.nvml_init_s, 3),
            unit="s",
            details={"driver": ctx.nvml.nvmlSystemGetDriverVersion()},
        ),
        *lost,
    ]


def _arch_of(ctx: Context, handle: object) -> int | None:
    """NVML_DEVICE_ARCH_* of the GPU (None where the driver cannot say)."""
    try:
        return int(ctx.nvml.nvmlDeviceGetArchitecture(handle))
    except pynvml.NVMLError:
        return None


# Fewer GPUs than the shape: NVIDIA's node check drains first, a reboot is a later step.
MISSING_ACTION = Action.DRAIN
MISSING_SOURCE = (
    "NVIDIA Health Validation, Node Checks, gpu_count (docs.nvidia.com/health-validation/"
    "reference/checks/node): CRITICAL when gpu_count != expected_gpu_count; recommended "
    "action: operational state drain, then reset_gpu -> restart_os -> service_required. "
    "NVIDIA Xid Catalog Xid 79 (GPU has fallen off the bus): RESTART_BM, a step after the "
    "drain; a GPU missing in two boots running is ISOLATE_RMA (kernel.messages)"
)


@check("gpu.count", "GPU count matches the shape (or --gpu-count)", timeout_action=Action.REBOOT)
def gpu_count(ctx: Context) -> Finding:
    found = len(ctx.handles)
    e = ctx.expect
    if e.shape is None and not e.gpu_count:
        if found >= 1:
            return ok(
                f"{found} GPU(s); no shape or GPU count given, so only 'at least one' is checked",
                measured=found,
                expected=">= 1",
            )
        return bad(Action.REBOOT, "no GPU visible", measured=0, expected=">= 1")
    # the shape's count, or the host's own (``--gpu SKU --gpu-count N``, or an expect.json
    # that names a count without a shape)
    where = f"the shape {e.shape} has" if e.shape else "the host has (--gpu-count)"
    source = SHAPES if e.shape else f"--gpu-count {e.gpu_count} ({e.origin})"
    if found == e.gpu_count:
        return ok(measured=found, expected=e.gpu_count, source=source)
    if found < e.gpu_count:
        return bad(
            MISSING_ACTION,
            f"{found} GPU(s) visible, {where} {e.gpu_count}: a GPU has fallen off the bus or "
            "is hidden; drain the node, then reset / reboot it, and isolate / RMA if the GPU "
            "stays missing",
            measured=found,
            expected=e.gpu_count,
            source=f"{source}; {MISSING_SOURCE}",
            details={"attribution": "node", "then": ["RESET_GPU", "REBOOT", "ISOLATE_RMA"]},
        )
    return bad(
        Action.DRAIN,
        f"{found} GPU(s) visible, {where} {e.gpu_count}: more GPUs than expected: the wrong "
        "machine or the wrong count; drain it",
        measured=found,
        expected=e.gpu_count,
        source=source,
        details={"attribution": "node"},
    )


def gpus_missing(ctx: Context) -> tuple[int, int] | None:
    """(visible, expected) when fewer GPUs are visible than the shape or --gpu-count names;
    None otherwise (or before NVML answered)."""
    want = ctx.expect.gpu_count
    if not want or not ctx.nvml_ready:
        return None
    found = len(ctx.handles)
    return (found, want) if found < want else None


@check("gpu.model", "GPU model matches the shape", per_gpu=True)
def gpu_model(ctx: Context, gpu: int) -> Finding:
    name = ctx.gpus[gpu]["name"]
    hw = ctx.expect.hardware
    if hw is None or not hw.nvml_names:
        return skip("no GPU model expected (no shape)", measured=name)
    if name in hw.nvml_names:
        return ok(measured=name, expected=hw.nvml_names, source=GPUS)
    return bad(
        Action.DRAIN,
        f"'{name}' is not a {ctx.expect.gpu}: wrong hardware for this shape",
        measured=name,
        expected=hw.nvml_names,
        source=GPUS,
    )


@functools.cache
def _sku_memory() -> dict[str, tuple[str, int, str]]:
    """NVML model name -> (SKU, MiB NVML reports, source) from images/compat/gpus.yaml."""
    rows = gpu_rows(Path(imagectl.images.__file__).resolve().parent / "compat")
    out: dict[str, tuple[str, int, str]] = {}
    for sku, g in rows.items():
        if g.get("nvml_memory_mib"):
            for name in g.get("nvml_names") or []:
                out[name] = (sku, int(g["nvml_memory_mib"]), str(g.get("nvml_memory_source")))
    return out


@check("gpu.memory", "GPU memory size matches the SKU's NVML total", per_gpu=True)
def gpu_memory(ctx: Context, gpu: int) -> Finding:
    total = int(ctx.nvml.nvmlDeviceGetMemoryInfo(ctx.handles[gpu]).total)
    mib = total / 2**20
    name = ctx.gpus[gpu].get("name")
    sku = _sku_memory().get(str(name))
    if sku is not None:
        t = ctx.thresholds["memory.sku_tolerance_pct"]
        floor = sku[1] * (1 - float(t.value) / 100)
        expected = f">= {floor:.0f} ({sku[1]} - {t.value:g}%)"
        src = f"{GPUS} {sku[0]}.nvml_memory_mib: {sku[2]}; {t.source}"
        if mib >= floor:
            return ok(measured=round(mib), expected=expected, unit="MiB", source=src)
        return bad(
            Action.ISOLATE_RMA,
            f"{mib:.0f} MiB visible, a {name} reports {sku[1]} MiB: memory is missing",
            measured=round(mib),
            expected=expected,
            unit="MiB",
            source=src,
        )
    hw = ctx.expect.hardware
    if hw is None or hw.memory_gib is None:
        return skip("no memory size known for this model (no shape)", measured=round(mib))
    # no NVML total recorded for this SKU: NVIDIA quotes decimal GB, and NVML reports at
    # least that many bytes on every SKU with a recorded total
    t = ctx.thresholds["memory.nominal_min_fraction"]
    floor_b = hw.memory_gib * 1e9 * float(t.value)
    expected = f">= {floor_b / 2**20:.0f}"
    if total >= floor_b:
        return ok(measured=round(mib), expected=expected, unit="MiB", source=t.source)
    return bad(
        Action.ISOLATE_RMA,
        f"{mib:.0f} MiB visible, a {ctx.expect.gpu} has {hw.memory_gib} GB",
        measured=round(mib),
        expected=expected,
        unit="MiB",
        source=t.source,
    )


@check("gpu.uuid", "GPU UUIDs readable and unique")
def gpu_uuid(ctx: Context) -> Finding:
    uuids = [g["uuid"] for g in ctx.gpus if "error" not in g]
    bad_ids = [u for u in uuids if not str(u).startswith("GPU-")]
    dupes = sorted({u for u in uuids if uuids.count(u) > 1})
    if bad_ids or dupes:
        return bad(
            Action.REBOOT,
            f"unreadable or duplicate UUIDs: {bad_ids + dupes}",
            measured=uuids,
        )
    return ok(f"{len(uuids)} unique", measured=len(uuids))


def majority(values: dict[int, Any]) -> Any:
    """The value more than half of ``values`` agree on (None when there is none)."""
    counts: dict[Any, int] = {}
    for v in values.values():
        counts[v] = counts.get(v, 0) + 1
    best = max(counts.items(), key=lambda kv: kv[1], default=(None, 0))
    return best[0] if best[1] * 2 > len(values) else None


def same_model(ctx: Context, gpu: int) -> list[int]:
    """This GPU and every other opened GPU with the same NVML model name."""
    name = ctx.gpus[gpu].get("name")
    return [
        int(g["index"])
        for g in ctx.gpus
        if "error" not in g and g.get("name") == name and ctx.handles[int(g["index"])] is not None
    ]


def peer_values(ctx: Context, gpu: int, read: Any) -> dict[int, Any]:
    """``read(handle)`` on every GPU of the same model; a peer that cannot answer is left out
    (its own checks report it), this GPU's own error propagates."""
    out: dict[int, Any] = {}
    for i in same_model(ctx, gpu):
        try:
            out[i] = read(ctx.handles[i])
        except pynvml.NVMLError:
            if i == gpu:
                raise
    return out


_VBIOS_SRC = (
    "NVIDIA HGX firmware: every GPU of a baseboard runs the same firmware bundle (nvfwupd "
    "updates them together): a GPU whose VBIOS differs from its peers missed an update"
)


@check(
    "gpu.inforom",
    "VBIOS and InfoROM readable, InfoROM valid, VBIOS the same as its peers'",
    per_gpu=True,
)
def gpu_inforom(ctx: Context, gpu: int) -> Finding:
    h = ctx.handles[gpu]
    vbios = ctx.nvml.nvmlDeviceGetVbiosVersion(h)
    image = ctx.nvml.nvmlDeviceGetInforomImageVersion(h)
    try:
        ctx.nvml.nvmlDeviceValidateInforom(h)
    except pynvml.NVMLError as exc:
        if error_name(exc) == "CORRUPTED_INFOROM":
            return bad(
                Action.ISOLATE_RMA,
                "InfoROM is corrupted (ECC and retirement records cannot be trusted)",
                measured={"vbios": vbios, "inforom": image, "valid": False},
            )
        raise
    measured = {"vbios": vbios, "inforom": image, "valid": True}
    # the same SKU on one host runs the same VBIOS: the odd one out missed an update
    versions = peer_values(ctx, gpu, ctx.nvml.nvmlDeviceGetVbiosVersion)
    common = majority(versions) if len(versions) > 1 else vbios
    if vbios != common:
        return bad(
            Action.DRAIN,
            f"VBIOS {vbios} differs from its peers' {common or sorted(set(versions.values()))}: "
            "mixed firmware on one host; drain and update the firmware bundle",
            measured=measured,
            expected={"vbios": common},
            source=_VBIOS_SRC,
            details={"vbios_by_gpu": versions},
        )
    return ok(measured=measured, source=_VBIOS_SRC if len(versions) > 1 else None)


@check("gpu.mig_mode", "MIG mode as expected", per_gpu=True)
def gpu_mig(ctx: Context, gpu: int) -> Finding:
    try:
        current, pending = ctx.nvml.nvmlDeviceGetMigMode(ctx.handles[gpu])
    except pynvml.NVMLError as exc:
        if (
            error_name(exc) in ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND")
            and not ctx.expect.mig_mode
            # a MIG-capable peer of the same model answers: the runner fails this GPU
            and not peers_answering(ctx, gpu, "nvmlDeviceGetMigMode", (ctx.handles[gpu],))
        ):
            return ok("MIG not supported on this GPU (so disabled)", measured=None, expected=False)
        raise
    want = 1 if ctx.expect.mig_mode else 0
    if current == want and pending == want:
        return ok(measured=bool(current), expected=bool(want))
    return bad(
        Action.RESET_GPU,
        f"MIG mode is {'enabled' if current else 'disabled'} (pending "
        f"{'enabled' if pending else 'disabled'}), expected {'enabled' if want else 'disabled'}: "
        f"set it with nvidia-smi -mig {want} and reset the GPU",
        measured={"current": bool(current), "pending": bool(pending)},
        expected=bool(want),
    )


_COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}


@check("gpu.compute_mode", "Compute mode as expected", per_gpu=True)
def gpu_compute_mode(ctx: Context, gpu: int) -> Finding:
    mode = _COMPUTE_MODES.get(ctx.nvml.nvmlDeviceGetComputeMode(ctx.handles[gpu]), "UNKNOWN")
    if mode == ctx.expect.compute_mode:
        return ok(measured=mode, expected=ctx.expect.compute_mode)
    return bad(
        Action.REBOOT,
        f"compute mode {mode}, expected {ctx.expect.compute_mode} (not persistent: a reboot "
        "restores the image's setting)",
        measured=mode,
        expected=ctx.expect.compute_mode,
    )


@check("gpu.persistence_mode", "Persistence mode on", per_gpu=True)
def gpu_persistence(ctx: Context, gpu: int) -> Finding:
    on = ctx.nvml.nvmlDeviceGetPersistenceMode(ctx.handles[gpu]) == pynvml.NVML_FEATURE_ENABLED
    if on == ctx.expect.persistence_mode:
        return ok(measured=on, expected=ctx.expect.persistence_mode)
    return bad(
        Action.BLOCK_IMAGE,
        "persistence mode is off: the image must enable nvidia-persistenced (else every "
        "process pays driver init and state is lost between jobs)",
        measured=on,
        expected=ctx.expect.persistence_mode,
        source="NVIDIA driver persistence documentation",
    )
