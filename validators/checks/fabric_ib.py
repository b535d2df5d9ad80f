"""InfiniBand on Azure ND: every HCA the shape has, each port ACTIVE / LinkUp at the shape's
width and speed, the port error counters judged as NVIDIA's diagnostics do
(``data/fabric.yaml``), and nvidia-peermem loaded for GPUDirect RDMA.

Port attributes come from /sys/class/infiniband/<hca>/ports/<N>/ (what ``ibstat`` prints);
HCAs are the devices whose port's link layer is InfiniBand (the accelerated-networking
Ethernet VF, also mlx5, is not one)."""

from __future__ import annotations

from typing import Any

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.fabric.applies import not_applicable, section, shape_nics
from imagectl.validators.fabric.parse import ib_devices, port_rate, sysfs_state
from imagectl.validators.fabric.policy import fabric_policy
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.results import Action

PEERMEM = (
    "NVIDIA GPUDirect RDMA documentation (nvidia-peermem: 'the kernel module must be loaded' "
    "for an RDMA NIC to read and write GPU memory through the MLNX/DOCA OFED peer-memory "
    "API); playbooks/roles/infiniband loads it at boot (modules-load.d)"
)


@check("fabric.ib.hcas", "Every InfiniBand HCA the shape has is present", needs_nvml=False)
def hcas(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "infiniband")) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    devices = ib_devices(section(ctx))
    details = {"hcas": [d.name for d in devices], "attribution": "node"}
    if len(devices) < nics.count:
        return bad(
            Action.DRAIN,
            f"{len(devices)} of the shape's {nics.count} InfiniBand HCAs present "
            f"({', '.join(details['hcas']) or 'none'}): the host lost an HCA (SR-IOV VF or "
            "card); drain it and have the provider look",
            measured=len(devices),
            expected=nics.count,
            unit="HCAs",
            source=nics.source,
            details=details,
        )
    return ok(
        measured=len(devices), expected=nics.count, unit="HCAs", source=nics.source, details=details
    )


@check(
    "fabric.ib.ports",
    "InfiniBand ports ACTIVE and LinkUp at the shape's width and speed",
    needs_nvml=False,
)
def ports(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "infiniband")) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    policy = fabric_policy()
    measured: dict[str, str] = {}
    faults: dict[str, str] = {}
    for dev in ib_devices(section(ctx)):
        for p in dev.ports:
            key = f"{dev.name}/{p.port}"
            state, state_name = sysfs_state(p.state)
            phys, phys_name = sysfs_state(p.phys_state)
            rate = port_rate(p.rate)
            measured[key] = f"{state_name}, {phys_name}, {p.rate or 'rate unreadable'}"
            if state != policy.state_active or phys != policy.phys_linkup:
                faults[key] = f"state {state_name}, physical state {phys_name}"
            elif rate is None:
                faults[key] = f"rate unreadable ({p.rate!r})"
            elif (nics.width and rate.width != nics.width) or (
                nics.speed and rate.speed != nics.speed
            ):
                faults[key] = (
                    f"{rate.gbps:g} Gb/s ({rate.width} {rate.speed}), the shape's is "
                    f"{nics.rate_gbps:g} Gb/s ({nics.width} {nics.speed})"
                )
    expected = f"ACTIVE, LinkUp, {nics.rate_gbps:g} Gb/sec ({nics.width} {nics.speed})"
    source = f"{policy.state_source}; {policy.phys_source}; {policy.rate_source}; {nics.source}"
    if faults:
        return bad(
            Action.DRAIN,
            f"{len(faults)} InfiniBand port(s) not as the shape expects: "
            + "; ".join(f"{k}: {v}" for k, v in sorted(faults.items())),
            measured=measured,
            expected=expected,
            source=source,
            details={"faults": faults, "attribution": "link"},
        )
    if not measured:
        return skip("no InfiniBand port to judge (fabric.ib.hcas says why)")
    return ok(
        f"{len(measured)} port(s)",
        measured=measured,
        expected=expected,
        source=source,
        details={"attribution": "link"},
    )


@check(
    "fabric.ib.counters",
    "InfiniBand port error counters as NVIDIA's diagnostics judge them",
    needs_nvml=False,
)
def counters(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "infiniband")) is not None:
        return why
    policy = fabric_policy()
    fab = section(ctx)
    failing: list[str] = []
    warning: list[str] = []
    sources: list[str] = []
    measured: dict[str, dict[str, Any]] = {}
    for dev in ib_devices(fab):
        for p in dev.ports:
            key = f"{dev.name}/{p.port}"
            for rule in policy.counters:
                total = p.counters.get(rule.name)
                if total is None:
                    continue
                after = (p.counters_after or {}).get(rule.name)
                rise = (after - total) if after is not None else None
                if total or rise:
                    measured.setdefault(key, {})[rule.name] = (
                        {"count": total, "rise": rise, "over_s": fab.interval_s} if rise else total
                    )
                top = rule.maximum
                if rise is not None and rise > policy.rising_max:
                    failing.append(
                        f"{key} {rule.name} rose by {rise} in {fab.interval_s:g} s (now {after})"
                    )
                    sources.append(policy.rising_reason)
                elif top is not None and top in (total, after):
                    failing.append(
                        f"{key} {rule.name} saturated at {top} (its "
                        f"{rule.bits}-bit maximum is {top}: a rise can no longer be seen)"
                    )
                    sources.append(
                        f"{policy.saturated.source}; imagectl policy: {policy.saturated.reason}"
                    )
                elif rule.fail_over is not None and total > rule.fail_over:
                    failing.append(f"{key} {rule.name} {total} > {rule.fail_over}")
                    sources.append(rule.source)
                elif total > rule.warn_over:
                    warning.append(f"{key} {rule.name} {total}")
    details = {"interval_s": fab.interval_s, "attribution": "link"}
    if failing:
        return bad(
            policy.rising_action,
            "InfiniBand error counters: "
            + "; ".join(failing)
            + ": drain the host; check the cable, transceiver and switch port",
            measured=measured,
            expected="no error counter rising or saturated; none over NVIDIA UFM's thresholds",
            source="; ".join(dict.fromkeys(sources)),
            details=details,
        )
    if warning:
        return warn(
            "error counts since the counters were cleared (not rising while watched): "
            + "; ".join(warning),
            measured=measured,
            expected=0,
            source=policy.counters_source,
            details=details,
        )
    return ok(
        "no error counts" + (f"; none rose in {fab.interval_s:g} s" if fab.interval_s else ""),
        measured=measured,
        expected=0,
        source=policy.counters_source,
        details=details,
    )


@check(
    "fabric.ib.peermem", "nvidia-peermem loaded (GPUDirect RDMA over InfiniBand)", needs_nvml=False
)
def peermem(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "infiniband")) is not None:
        return why
    nics = shape_nics(ctx)
    pins = ctx.expect.network.infiniband
    if nics is None or not nics.gpudirect_rdma:
        return skip("the shape has no GPUDirect RDMA")
    if pins is None or not pins.peermem:
        return skip("the stack does not load nvidia-peermem (network.infiniband.peermem)")
    loaded = section(ctx).modules.get("nvidia_peermem")
    details = {"modules": section(ctx).modules, "attribution": "node"}
    if not loaded:
        return bad(
            Action.BLOCK_IMAGE,
            "nvidia_peermem is not loaded (/sys/module/nvidia_peermem absent): the image "
            "should load it at boot (/etc/modules-load.d/nvidia-peermem.conf)",
            measured=False,
            expected=True,
            source=PEERMEM,
            details=details,
        )
    return ok(measured=True, expected=True, source=PEERMEM, details=details)
