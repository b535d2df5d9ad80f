"""Driver and software conformance: the running host against the image's pins.

Driver (NVML and kernel module), driver/library match, CUDA driver API vs the pinned
toolkit, kernel-module flavour, running kernel, fabric manager, system NCCL (read from
libnccl itself), pinned packages and holds, and the image manifest against dpkg.
"""

from __future__ import annotations

import time
from typing import Any

import pynvml

from imagectl.core.versions import Dotted, upstream_version
from imagectl.validators.checks.base import check
from imagectl.validators.checks.inventory import gpus_missing
from imagectl.validators.context import Context
from imagectl.validators.findings import Finding, bad, ok, skip
from imagectl.validators.host.kernel_log import api_mismatch
from imagectl.validators.manifest import parse_manifest
from imagectl.validators.nvml.errors import error_name
from imagectl.validators.nvml.fabric import FabricInfo, read_fabric
from imagectl.validators.nvml.mig import MigLinks, links_off_by_mig
from imagectl.validators.nvml.policy import nvml_policy
from imagectl.validators.results import Action

STACK = "the stack's pins (images/stacks/)"


def health_fault(info: FabricInfo) -> Finding | None:
    """A failing Finding when the v2 health mask reports a fault (``data/nvml.yaml``
    ``fabric_health``); None when it is clean, NOT_SUPPORTED, or absent (v1 structure)."""
    if info.health_mask is None:
        return None
    policy = nvml_policy()
    mask = info.health_mask
    fields = {f.name: f.value(mask) for f in policy.fabric_fields}
    faults = [(f, f.bad[fields[f.name]]) for f in policy.fabric_fields if fields[f.name] in f.bad]
    if not faults:
        return None
    worst = max((f.action for f, _ in faults), key=lambda a: a.rank)
    return bad(
        worst,
        f"fabric state {info.state}, but its health mask reports: "
        + "; ".join(text for _, text in faults),
        measured=[f.name for f, _ in faults],
        expected="COMPLETED with a clean health mask",
        source="; ".join(f.source for f, _ in faults),
        details={"mask": hex(mask), "fields": fields, "layout": info.layout},
    )


def _pin_missing(what: str) -> Finding:
    return skip(f"no {what} pinned (pass --stack or --expect)")


def version_matches(installed: str, pin: str) -> bool:
    """dpkg version vs pin: equal, equal without epoch, or the pin plus a package revision."""
    if installed == pin:
        return True
    bare = installed.split(":", 1)[-1]
    pin_bare = pin.split(":", 1)[-1]
    if bare == pin_bare:
        return True
    return any(bare.startswith(pin_bare + sep) for sep in ("-", "~", "+"))


def _nvml_driver(ctx: Context) -> str | None:
    if not ctx.nvml_ready:
        return None
    version: str = ctx.nvml.nvmlSystemGetDriverVersion()
    return version


@check("sw.driver.version", "Driver version equals the pin", needs_nvml=False)
def driver_version(ctx: Context) -> Finding:
    pin = ctx.expect.driver
    if pin is None:
        return _pin_missing("driver")
    version = _nvml_driver(ctx)
    via = "NVML"
    if version is None:
        # NVML is down: the installed user-space when it and the loaded module disagree
        # (a driver upgraded without reboot: the image is right, the node needs a reboot),
        # else the kernel module.
        module = ctx.fact("nvidia_module") or {}
        library = ctx.fact("nvml_library") or {}
        if (
            module.get("loaded")
            and library.get("version")
            and (library["version"] != module.get("version"))
        ):
            version, via = library["version"], "the installed libnvidia-ml"
        else:
            version, via = module.get("version"), module.get("source", "kernel module")
    if version is None:
        return bad(
            Action.BLOCK_IMAGE,
            "no NVIDIA driver found (neither NVML nor a kernel module answers)",
            measured=None,
            expected=pin,
            source=STACK,
        )
    if Dotted.parse(version) == Dotted.parse(pin):
        return ok(f"read from {via}", measured=version, expected=pin, source=STACK)
    return bad(
        Action.BLOCK_IMAGE,
        f"driver {version} (from {via}) is not the pinned {pin}",
        measured=version,
        expected=pin,
        source=STACK,
    )


@check(
    "sw.driver.library_match",
    "Driver/library version match (user-space vs kernel module)",
    needs_nvml=False,
)
def library_match(ctx: Context) -> Finding:
    module = ctx.fact("nvidia_module") or {}
    library = ctx.fact("nvml_library") or {}
    kver, lver = module.get("version") if module.get("loaded") else None, library.get("version")
    measured = {"kernel_module": kver, "library": lver}
    if ctx.nvml_error is not None and error_name(ctx.nvml_error) == "LIB_RM_VERSION_MISMATCH":
        return bad(
            Action.REBOOT,
            f"Driver/library version mismatch: NVML library {lver or '?'} vs kernel module "
            f"{kver or '?'}; reboot to load the matching module (or reinstall one driver)",
            measured=measured,
        )
    log = ctx.kernel_log()
    mismatch = api_mismatch(log.text)
    if mismatch:
        client, mod = mismatch
        return bad(
            Action.REBOOT,
            f"Driver/library version mismatch in the kernel log: client {client}, kernel "
            f"module {mod}",
            measured={"client": client, "kernel_module": mod},
        )
    if kver and lver:
        if kver == lver:
            return ok(measured=measured)
        return bad(
            Action.REBOOT,
            f"Driver/library version mismatch: libnvidia-ml {lver} vs kernel module {kver}",
            measured=measured,
        )
    return skip(
        "the kernel module or the NVML library is absent: nothing to compare", measured=measured
    )


@check("sw.cuda.driver_supports_toolkit", "CUDA driver API supports the pinned toolkit")
def cuda_supports(ctx: Context) -> Finding:
    pin = ctx.expect.cuda
    if pin is None:
        return _pin_missing("CUDA toolkit")
    code = int(ctx.nvml.nvmlSystemGetCudaDriverVersion_v2())
    driver_cuda = Dotted.parse(f"{code // 1000}.{code % 1000 // 10}")
    want = Dotted.parse(pin)
    need = Dotted.parse(f"{want.major}.{want.minor}")
    if driver_cuda >= need:
        return ok(measured=str(driver_cuda), expected=f">= {need}", source=STACK)
    return bad(
        Action.BLOCK_IMAGE,
        f"the driver supports CUDA {driver_cuda}, the image pins toolkit {pin}: "
        "'CUDA driver version is insufficient' at run time",
        measured=str(driver_cuda),
        expected=f">= {need}",
        source="images/compat/cuda.yaml",
    )


@check(
    "sw.kernel.module_flavour",
    "Kernel-module flavour (open/proprietary) equals the pin",
    needs_nvml=False,
)
def module_flavour(ctx: Context) -> Finding:
    pin = ctx.expect.kernel_modules
    if pin is None:
        return _pin_missing("kernel-module flavour")
    module = ctx.fact("nvidia_module") or {}
    flavour = module.get("flavour")
    if flavour is None:
        return bad(
            Action.BLOCK_IMAGE,
            "no nvidia kernel module loaded or installed",
            measured=None,
            expected=pin,
            source=STACK,
        )
    if flavour == pin:
        return ok(f"from {module.get('source')}", measured=flavour, expected=pin, source=STACK)
    return bad(
        Action.BLOCK_IMAGE,
        f"{flavour} kernel modules, the stack pins {pin}",
        measured=flavour,
        expected=pin,
        source=STACK,
    )


@check("sw.kernel.release", "Running kernel equals the pin", needs_nvml=False)
def kernel_release(ctx: Context) -> Finding:
    pin = ctx.expect.kernel
    running = ctx.fact("kernel_release")
    if pin is None:
        return skip("no kernel pinned for this cloud", measured=running)
    if running == pin:
        return ok(measured=running, expected=pin, source=STACK)
    return bad(
        Action.BLOCK_IMAGE,
        f"running kernel {running}, the stack pins {pin} (unattended upgrade or wrong image)",
        measured=running,
        expected=pin,
        source=STACK,
    )


def _fm_needed(ctx: Context) -> bool:
    """Fabric manager is needed where the shape (or the GPU table, for --gpu) says the GPUs
    share NVSwitches. The image's pin alone decides only where no hardware is described
    (its own expect.json on a host of unknown shape): an image built for NVSwitch hosts
    that boots on a one-GPU NC H100 v5 has no switch for fabric manager to manage."""
    hw = ctx.expect.hardware
    if hw is not None:
        return hw.nvswitch
    return bool(ctx.expect.fabric_manager)


def _fm_deferred(ctx: Context) -> Finding | None:
    """GPUs missing (gpu.count fails): fabric manager cannot bring up a baseboard whose
    GPUs are not all there, so its state is judged once they are back, not blamed on the
    image."""
    short = gpus_missing(ctx)
    if short is None:
        return None
    return skip(
        f"inconclusive: {short[0]} of {short[1]} GPU(s) visible (gpu.count fails): fabric "
        "manager is judged once every GPU of the NVSwitch baseboard is back",
        details={"root_cause": "gpu.count", "inconclusive": True, "missing": ["GPUs"]},
    )


def _fm_package(ctx: Context) -> tuple[str, dict[str, Any]] | None:
    pkgs: dict[str, dict[str, Any]] = ctx.fact("packages") or {}
    for name in sorted(pkgs):
        if name.startswith("nvidia-fabricmanager") and not name.endswith("-dev"):
            return name, pkgs[name]
    return None


@check("sw.fabricmanager.active", "Fabric manager running (NVSwitch shapes)", needs_nvml=False)
def fm_active(ctx: Context) -> Finding:
    if not _fm_needed(ctx):
        return skip("no NVSwitch on this shape: fabric manager not needed")
    if (deferred := _fm_deferred(ctx)) is not None:
        return deferred
    svc = (ctx.fact("services") or {}).get("nvidia-fabricmanager", {})
    if svc.get("active"):
        return ok(measured=svc.get("state"), expected="active")
    if _fm_package(ctx) is None:
        return bad(
            Action.BLOCK_IMAGE,
            "nvidia-fabricmanager is not installed on an NVSwitch shape",
            measured="not installed",
            expected="active",
        )
    return bad(
        Action.REBOOT,
        f"nvidia-fabricmanager is {svc.get('state', 'not running')}: without it CUDA fails "
        "on NVSwitch systems; check `journalctl -u nvidia-fabricmanager`, then reboot",
        measured=svc.get("state"),
        expected="active",
    )


@check("sw.fabricmanager.version", "Fabric manager version equals the driver", needs_nvml=False)
def fm_version(ctx: Context) -> Finding:
    if not _fm_needed(ctx):
        return skip("no NVSwitch on this shape: fabric manager not needed")
    found = _fm_package(ctx)
    if found is None and (deferred := _fm_deferred(ctx)) is not None:
        return deferred
    if found is None:
        return bad(
            Action.BLOCK_IMAGE,
            "nvidia-fabricmanager is not installed",
            measured=None,
            expected=ctx.expect.fabric_manager or "== driver",
        )
    name, pkg = found
    driver = (
        _nvml_driver(ctx) or ctx.expect.driver or (ctx.fact("nvidia_module") or {}).get("version")
    )
    if driver is None:
        return skip("driver version unknown", measured=pkg["version"])
    if version_matches(pkg["version"], driver):
        return ok(
            measured=pkg["version"],
            expected=driver,
            source="NVIDIA Fabric Manager user guide: FM version must equal the driver",
        )
    return bad(
        Action.BLOCK_IMAGE,
        f"{name} {pkg['version']} does not match driver {driver}: fabric manager refuses to "
        "start on a version mismatch",
        measured=pkg["version"],
        expected=driver,
        source="NVIDIA Fabric Manager user guide: FM version must equal the driver",
    )


def _fabric(ctx: Context, gpu: int) -> tuple[str, int, int]:
    # v2 structure, or the v1 layout on drivers without ...InfoV (nvml/fabric.py)
    info = read_fabric(ctx.nvml, ctx.handles[gpu])
    return info.state, info.status, info.clique_id


def _fabric_under_mig(ctx: Context, gpu: int, mig: MigLinks) -> Finding | None:
    """MIG on: no NVLink, so no fabric registration is expected. A GPU that is registered
    anyway (COMPLETED) is judged as usual (None)."""
    try:
        info = read_fabric(ctx.nvml, ctx.handles[gpu])
    except pynvml.NVMLError as exc:
        if error_name(exc) not in ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "INVALID_ARGUMENT"):
            raise
        return ok(
            f"{mig.note()}: no NVLink fabric info ({error_name(exc)}), as expected",
            measured=error_name(exc),
            expected="not in the NVLink fabric (MIG)",
            source=mig.source,
        )
    if info.state == "COMPLETED":
        return None
    return ok(
        f"{mig.note()}: not part of the NVLink fabric (state {info.state}), as expected",
        measured=info.state,
        expected="not in the NVLink fabric (MIG)",
        source=mig.source,
        details={"mig": True, "arch": mig.arch, "layout": info.layout},
    )


@check(
    "gpu.fabric.state",
    "NVML fabric state COMPLETED, health mask clean (NVSwitch shapes)",
    per_gpu=True,
    timeout_s=20.0,
)
def fabric_state(ctx: Context, gpu: int) -> Finding:
    """Boot readiness: right after boot the fabric may still be training, so a live run
    waits (once per run, ``fabric.wait_s``) for NOT_STARTED / IN_PROGRESS to complete."""
    if not _fm_needed(ctx):
        return skip("no NVSwitch on this shape")
    mig = links_off_by_mig(ctx.nvml, ctx.handles[gpu])
    if mig is not None:
        under_mig = _fabric_under_mig(ctx, gpu, mig)
        if under_mig is not None:
            return under_mig
    state, status, clique = _fabric(ctx, gpu)
    waited = 0.0
    if state in ("NOT_STARTED", "IN_PROGRESS") and ctx.nvml.kind == "live":
        t = ctx.thresholds["fabric.wait_s"]
        if ctx.fabric_deadline is None:
            ctx.fabric_deadline = time.monotonic() + float(t.value)
        started = time.monotonic()
        while state != "COMPLETED" and time.monotonic() < ctx.fabric_deadline:
            time.sleep(0.25)
            state, status, clique = _fabric(ctx, gpu)
        waited = time.monotonic() - started
    if state == "COMPLETED" and status == pynvml.NVML_SUCCESS:
        # and the v2 health mask (degraded bandwidth, route unhealthy, ...): nvml/fabric.py
        unhealthy = health_fault(read_fabric(ctx.nvml, ctx.handles[gpu]))
        if unhealthy is not None:
            return unhealthy
        return ok(
            measured=state,
            expected="COMPLETED",
            details={"clique_id": clique, "waited_s": round(waited, 2)},
        )
    return bad(
        Action.REBOOT,
        f"fabric state {state}, status {status}: the GPU is not part of the NVLink fabric "
        "(fabric manager failed or still training); restart fabric manager or reboot",
        measured=state,
        expected="COMPLETED",
        details={"status": status, "waited_s": round(waited, 2)},
    )


@check("sw.nccl.version", "System NCCL (from libnccl) equals the pin", needs_nvml=False)
def nccl_version(ctx: Context) -> Finding:
    pin = ctx.expect.nccl
    if pin is None:
        return _pin_missing("NCCL")
    want = pin.split("-", 1)[0]
    nccl = ctx.fact("nccl") or {}
    found = nccl.get("version")
    if found is None:
        return bad(
            Action.BLOCK_IMAGE,
            f"no system NCCL: {nccl.get('error')}",
            measured=None,
            expected=want,
            source=STACK,
        )
    if Dotted.parse(found) == Dotted.parse(want):
        return ok(
            f"ncclGetVersion from {nccl.get('path')}", measured=found, expected=want, source=STACK
        )
    return bad(
        Action.BLOCK_IMAGE,
        f"libnccl reports {found} ({nccl.get('path')}), the stack pins {want}",
        measured=found,
        expected=want,
        source=STACK,
    )


@check("sw.packages.pinned", "Pinned packages installed at their versions", needs_nvml=False)
def packages_pinned(ctx: Context) -> Finding:
    want = ctx.expect.packages
    if not want:
        return _pin_missing("package")
    pkgs: dict[str, dict[str, Any]] = ctx.fact("packages") or {}
    wrong = {}
    for name, pin in sorted(want.items()):
        got = pkgs.get(name)
        if not got or not got.get("installed", True):
            wrong[name] = {"expected": pin, "installed": None}
        elif not version_matches(got["version"], pin):
            wrong[name] = {"expected": pin, "installed": got["version"]}
    if not wrong:
        return ok(f"{len(want)} package(s) at their pins", measured=len(want), expected=len(want))
    return bad(
        Action.BLOCK_IMAGE,
        "; ".join(
            f"{n}: {w['installed'] or 'missing'} != {w['expected']}" for n, w in wrong.items()
        ),
        measured=wrong,
        expected=want,
        source=STACK,
    )


@check(
    "sw.packages.held",
    "Pinned packages held against upgrades",
    needs_nvml=False,
)
def packages_held(ctx: Context) -> Finding:
    want = ctx.expect.held
    if not want:
        return _pin_missing("held package")
    pkgs: dict[str, dict[str, Any]] = ctx.fact("packages") or {}
    loose = [n for n in want if n in pkgs and not pkgs[n].get("held")]
    if not loose:
        return ok(measured=sorted(want))
    return bad(
        Action.BLOCK_IMAGE,
        f"not on hold (an apt upgrade can replace them): {', '.join(loose)}",
        measured=loose,
        expected=want,
    )


# The manifest's component fields against the stack's pins (ImageManifest attribute,
# Expectations attribute); NCCL's own version has no Debian revision.
_MANIFEST_PINS = (
    ("driver_version", "driver"),
    ("fabric_manager_version", "fabric_manager"),
    ("cuda", "cuda"),
    ("dcgm", "dcgm"),
    ("container_toolkit", "container_toolkit"),
    ("kernel_modules", "kernel_modules"),
)


@check("sw.manifest.agrees", "Image manifest agrees with dpkg and the pins", needs_nvml=False)
def manifest_agrees(ctx: Context) -> Finding:
    doc = ctx.fact("manifest")
    if doc is None:
        return skip("no /etc/imagectl/manifest.json on this host")
    if isinstance(doc, dict) and "$invalid" in doc:
        return bad(Action.BLOCK_IMAGE, f"manifest.json is corrupt: {doc['$invalid']}")
    try:
        manifest = parse_manifest(doc)
    except ValueError as exc:
        return bad(Action.BLOCK_IMAGE, f"manifest.json is not an image manifest: {exc}")
    listed = manifest.packages
    pkgs: dict[str, dict[str, Any]] = ctx.fact("packages") or {}
    differ: dict[str, dict[str, Any]] = {
        n: {"manifest": v, "dpkg": (pkgs.get(n) or {}).get("version")}
        for n, v in sorted(listed.items())
        if (pkgs.get(n) or {}).get("version") != v
    }
    if ctx.expect.stack_digest and manifest.stack_digest not in (None, ctx.expect.stack_digest):
        differ["stack_digest"] = {
            "manifest": manifest.stack_digest,
            "expected": ctx.expect.stack_digest,
        }
    for attr, pin_field in _MANIFEST_PINS:
        recorded, pin = getattr(manifest, attr), getattr(ctx.expect, pin_field)
        if recorded and pin and not version_matches(str(recorded), str(pin)):
            differ[pin_field] = {"manifest": recorded, "expected": pin}
    nccl, pin = manifest.nccl_version, ctx.expect.nccl
    if nccl and pin and upstream_version(nccl) != upstream_version(pin):
        differ["nccl"] = {"manifest": nccl, "expected": pin}
    if not differ:
        return ok(f"{len(listed)} package(s) agree", measured=len(listed))
    return bad(
        Action.BLOCK_IMAGE,
        "the manifest does not describe this host or the stack's pins: "
        + "; ".join(f"{n}: {d}" for n, d in differ.items()),
        measured=differ,
        source=STACK,
    )
