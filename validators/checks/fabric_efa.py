"""EFA on AWS: libfabric's EFA provider answers (``fi_info -p efa``, libfabric's version
recorded) and the host has every EFA device its shape has, each port ACTIVE.

AWS's own check of an EFA install is ``fi_info -p efa -t FI_EP_RDM`` (EC2 User Guide, "Get
started with EFA and NCCL", step "Confirm that the EFA software components were
successfully installed"); the device count is the shape's (images/catalog/shapes.yaml)."""

from __future__ import annotations

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.fabric.applies import not_applicable, section, shape_nics
from imagectl.validators.fabric.parse import (
    efa_devices,
    fi_info_efa_domains,
    libfabric_version,
    sysfs_state,
)
from imagectl.validators.fabric.policy import fabric_policy
from imagectl.validators.findings import Finding, bad, ok
from imagectl.validators.results import Action

AWS_EFA = (
    "AWS EC2 User Guide, 'Get started with EFA and NCCL': verify the install with "
    "`fi_info -p efa -t FI_EP_RDM` (the efa provider listed)"
)


@check("fabric.efa.provider", "libfabric's EFA provider answers (fi_info -p efa)", needs_nvml=False)
def efa_provider(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "efa")) is not None:
        return why
    fab = section(ctx)
    run = fab.fi_info
    version = libfabric_version(fab.fi_version.stdout) if fab.fi_version else None
    details = {"libfabric": version, "attribution": "node"}
    if run is None or run.exit_code is None:
        why_not = run.error if run is not None else "not run"
        return bad(
            Action.BLOCK_IMAGE,
            f"fi_info could not run ({why_not}): the image's EFA software (libfabric) is missing",
            expected="efa provider",
            source=AWS_EFA,
            details=details,
        )
    domains = fi_info_efa_domains(run.stdout)
    if domains:
        return ok(
            f"libfabric {version or '?'}: efa provider on {len(domains)} device(s)",
            measured=len(domains),
            expected="efa provider",
            source=AWS_EFA,
            details={**details, "domains": domains},
        )
    devices = efa_devices(fab)
    tail = (run.stderr_tail or run.stdout).strip()[-300:]
    if not devices:
        return bad(
            Action.DRAIN,
            f"fi_info -p efa lists no provider and the host has no EFA device: {tail}",
            measured=0,
            expected="efa provider",
            source=AWS_EFA,
            details=details,
        )
    return bad(
        Action.BLOCK_IMAGE,
        f"{len(devices)} EFA device(s) attached but fi_info -p efa lists no efa provider "
        f"(exit {run.exit_code}): the image's libfabric lacks the EFA provider: {tail}",
        measured=0,
        expected="efa provider",
        source=AWS_EFA,
        details=details,
    )


@check(
    "fabric.efa.devices",
    "Every EFA device the shape has is present, ports ACTIVE",
    needs_nvml=False,
)
def efa_device_count(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "efa")) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    fab = section(ctx)
    policy = fabric_policy()
    devices = efa_devices(fab)
    names = [d.name for d in devices]
    down = {
        f"{d.name}/{p.port}": p.state or "unreadable"
        for d in devices
        for p in d.ports
        if sysfs_state(p.state)[0] != policy.state_active
    }
    listed = fi_info_efa_domains(fab.fi_info.stdout) if fab.fi_info else []
    details = {"devices": names, "fi_info_domains": listed, "attribution": "node"}
    source = f"{nics.source}; {policy.state_source}"
    if len(devices) < nics.count:
        return bad(
            Action.DRAIN,
            f"{len(devices)} of the shape's {nics.count} EFA devices present: the instance "
            "is missing network cards (EFA interfaces); launch it again with every card",
            measured=len(devices),
            expected=nics.count,
            unit="devices",
            source=source,
            details=details,
        )
    if down:
        return bad(
            Action.DRAIN,
            f"EFA port(s) not ACTIVE: {down}",
            measured=len(devices) - len(down),
            expected=nics.count,
            unit="devices",
            source=source,
            details={**details, "not_active": down, "attribution": "link"},
        )
    return ok(
        f"{len(devices)} EFA devices, every port ACTIVE",
        measured=len(devices),
        expected=nics.count,
        unit="devices",
        source=source,
        details=details,
    )
