"""What NCCL itself does on the fabric, from a tiny NCCL run with NCCL_DEBUG=INFO
(``fabric/nccl_probe.py``): the network it uses is the one the shape's kind of GPU network
needs (``data/fabric.yaml`` ``nccl_net``: aws-ofi-nccl at the pinned version on EFA, NCCL's
IB transport on InfiniBand, Google's gIB on RoCE, FasTrak on GPUDirect-TCPXO, GPUDirectTCPX
on GPUDirect-TCPX), not its TCP fallback; it opens every GPU NIC (NCCL_IB_HCA,
FI_EFA_IFACE, NCCL_FASTRAK_IFNAME, NCCL_GPUDIRECTTCPX_SOCKET_IFNAME leave none out); and
GPUDirect RDMA is on for every NIC where the shape supports it (NCCL's topology dump,
``<net gdr="1">``). The run is GPU work: quick, full and burn."""

from __future__ import annotations

from imagectl.validators.checks.base import LOADED_PROFILES, check
from imagectl.validators.context import Context
from imagectl.validators.expectations import Network
from imagectl.validators.fabric.applies import (
    LABEL,
    inconclusive,
    not_applicable,
    section,
    shape_nics,
)
from imagectl.validators.fabric.model import NcclRun
from imagectl.validators.fabric.parse import (
    efa_devices,
    fabric_devices,
    gvnic_devices,
    ib_devices,
    nccl_net,
    nccl_settings,
    nccl_topology,
    port_rate,
    roce_devices,
    sysfs_state,
)
from imagectl.validators.fabric.policy import (
    NetRule,
    fabric_policy,
    nccl_kind,
    net_rules,
    network_matches,
)
from imagectl.validators.fabric.topology import expected_nearest
from imagectl.validators.findings import Finding, bad, ok, skip
from imagectl.validators.nics import Nics
from imagectl.validators.results import Action

NCCL_TOPO = (
    "NVIDIA NCCL src/graph/topo.cc / xml.cc: each net's 'gdr' attribute is 1 when the "
    "network reports NCCL_PTR_CUDA (GPUDirect RDMA) for that NIC; NCCL_TOPO_DUMP_FILE "
    "writes the detected topology (NCCL environment variables documentation)"
)
OFI_GDR = (
    "aws/aws-ofi-nccl src/platform-aws.c: gdr_required on p4d, p4de and p5 and later "
    "(OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK: 'the plugin can be used without GDR support even "
    "on platforms that support GDR')"
)


def fabric_nics(ctx: Context) -> list[str]:
    """The names of the host's GPU NICs of the shape's fabric (on gVNIC: those nearest a GPU,
    not the primary NIC beside them)."""
    nics = shape_nics(ctx)
    fab = section(ctx)
    if nics is None:
        return []
    if nics.fabric == "gvnic":
        near = expected_nearest(fab, nics)
        names = {n for found in near.values() for n in found if not n.startswith("(missing")}
        return sorted(names) or [d.name for d in gvnic_devices(fab)]
    return list(fabric_devices(fab, nics.fabric))


def net_rule(nics: Nics) -> NetRule:
    """The shape's NCCL network rule (data/fabric.yaml nccl_net, by kind)."""
    return net_rules()[nccl_kind(nics.fabric, nics.gpudirect)]


def uses_fabric(ctx: Context, log: str) -> bool:
    """NCCL's run used the fabric's network (else fabric.nccl.net fails and says why)."""
    nics = shape_nics(ctx)
    names = list(net_rule(nics).names) if nics is not None else []
    return network_matches(nccl_net(log).network, names)


def nccl_evidence(
    ctx: Context, *, topology: bool = False, on_fabric: bool = True, gdr: bool = False
) -> tuple[Nics, NcclRun] | Finding:
    """The shape's NICs and NCCL's run, for a check of what NCCL does on the fabric; or the
    finding that says why the check has nothing to judge: the check does not apply, the
    shape has no GPUDirect RDMA (``gdr``), no run (or, with ``topology``, no topology dump)
    was recorded, or NCCL did not use the fabric's network (``on_fabric``)."""
    nics = shape_nics(ctx)
    # EFA and InfiniBand software is the image's pin (no pin: not judged); RoCE (gIB) and
    # gVNIC (GPUDirect-TCPX/O) have no pin in the stack: NCCL's use of them is judged always
    pinned_kind = nics is not None and nics.fabric in Network.model_fields
    if (why := not_applicable(ctx, needs_software=pinned_kind)) is not None:
        return why
    assert nics is not None
    if gdr and not nics.gpudirect_rdma:
        return skip(f"shape {ctx.expect.shape} has no GPUDirect RDMA")
    run = ctx.fabric_nccl()
    if topology and (run is None or not run.topo_xml):
        return skip("no NCCL topology dump recorded")
    if run is None:
        return skip("no NCCL run recorded (imagectl snapshot records one on a GPU host)")
    if on_fabric and not uses_fabric(ctx, run.run.stdout):
        return skip("NCCL does not use the fabric's network (fabric.nccl.net says why)")
    return nics, run


@check(
    "fabric.nccl.net",
    "NCCL uses the GPU network's transport (aws-ofi-nccl, IB, gIB, FasTrak, GPUDirectTCPX), "
    "not sockets",
    needs_nvml=False,
    profiles=LOADED_PROFILES,
    timeout_s=150.0,
)
def nccl_network(ctx: Context) -> Finding:
    nics_here = shape_nics(ctx)
    if nics_here is not None and nics_here.fabric == "none":
        return _within_host(ctx, nics_here)
    if isinstance(found := nccl_evidence(ctx, on_fabric=False), Finding):
        return found
    nics, run = found
    rule = net_rule(nics)
    seen = nccl_net(run.run.stdout)
    details = {
        "nccl": seen.nccl_version,
        "plugin": seen.ofi_plugin,
        "libfabric": seen.ofi_libfabric,
        "provider": seen.ofi_provider,
        "nics": seen.ofi_nics,
        "ib_devices": seen.ib_devices,
        "plugin_problems": seen.plugin_problems,
        "env": run.env,
        "attribution": "node",
    }
    expected = " or ".join(rule.names)
    source = rule.source
    if seen.network is None:
        tail = (run.run.error or run.run.stderr_tail or run.run.stdout).strip()[-400:]
        return bad(
            Action.BLOCK_IMAGE,
            f"NCCL never said which network it uses (exit {run.run.exit_code}): {tail}",
            expected=expected,
            source=source,
            details=details,
        )
    matches = network_matches(seen.network, list(rule.names))
    if not matches and not fabric_nics(ctx):
        return bad(
            Action.DRAIN,
            f"NCCL uses '{seen.network}': the host has no {LABEL[nics.fabric]} device for it "
            "(the fabric's device check says which are missing)",
            measured=seen.network,
            expected=expected,
            source=source,
            details=details,
        )
    if not matches:
        fell_back = seen.network == fabric_policy().nccl_fallback
        cause = "; ".join(seen.plugin_problems) or "; ".join(seen.warnings[:2])
        return bad(
            Action.BLOCK_IMAGE,
            f"NCCL uses '{seen.network}'"
            + (" (its TCP fallback)" if fell_back else "")
            + f" on {LABEL[nics.fabric]}, not {expected}"
            + (f": {cause}" if cause else "")
            + (
                ": multi-node collectives would run over TCP"
                if fell_back
                else f": NCCL loaded another transport than {rule.plugin or expected}"
            ),
            measured=seen.network,
            expected=expected,
            source=source,
            details=details,
        )
    pins = ctx.expect.network.efa
    if nics.fabric == "efa" and pins is not None:
        version = seen.ofi_plugin or ""
        if not version.startswith(pins.ofi_nccl):
            return bad(
                Action.BLOCK_IMAGE,
                f"NCCL loaded aws-ofi-nccl {version or '(version not logged)'}, the stack pins "
                f"{pins.ofi_nccl}: another plugin is found first (NCCL_NET_PLUGIN, "
                "LD_LIBRARY_PATH)",
                measured=version or None,
                expected=pins.ofi_nccl,
                source=f"{source}; the stack's network.efa.ofi_nccl",
                details=details,
            )
    return ok(
        f"NCCL {seen.nccl_version or '?'} uses {seen.network}"
        + (
            f" (aws-ofi-nccl {seen.ofi_plugin}, provider {seen.ofi_provider})"
            if seen.ofi_plugin
            else ""
        ),
        measured=seen.network,
        expected=expected,
        source=source,
        details=details,
    )


def _within_host(ctx: Context, nics: Nics) -> Finding:
    """A shape whose GPUs use no NIC: NCCL's net carries no GPU traffic; recorded."""
    rule = net_rule(nics)
    fab = ctx.fabric()
    run = ctx.fabric_nccl() if fab is not None else None
    if run is None:
        return skip(
            f"shape {ctx.expect.shape}'s GPUs use no NIC and no NCCL run was recorded "
            f"({nics.source})"
        )
    seen = nccl_net(run.run.stdout)
    return ok(
        f"shape {ctx.expect.shape}'s GPUs use no NIC: NCCL runs within the host; its network "
        f"({seen.network or 'not logged'}) carries no GPU traffic",
        measured=seen.network,
        expected="any (within the host)",
        source=f"{rule.source}; {nics.source}",
        details={"nccl": seen.nccl_version, "attribution": "node"},
    )


@check(
    "fabric.gdr",
    "GPUDirect RDMA on for every fabric NIC where the shape supports it (NCCL's view)",
    needs_nvml=False,
    profiles=LOADED_PROFILES,
    timeout_s=150.0,
)
def gdr(ctx: Context) -> Finding:
    if isinstance(found := nccl_evidence(ctx, topology=True, gdr=True), Finding):
        return found
    nics, run = found
    assert run.topo_xml is not None
    topo = nccl_topology(run.topo_xml)
    fab = section(ctx)
    names = set(fabric_nics(ctx))
    flags = {n: g for n, g in topo.gdr.items() if n in names}
    source = NCCL_TOPO + ("; " + OFI_GDR if nics.fabric == "efa" else "") + f"; {nics.source}"
    off = sorted(n for n, g in flags.items() if not g)
    details = {"gdr": flags, "modules": fab.modules, "attribution": "node"}
    if topo.error or not flags:
        return bad(
            Action.BLOCK_IMAGE,
            f"NCCL's topology dump names none of the fabric's NICs ({topo.error or 'no net'})",
            expected="gdr=1 on every fabric NIC",
            source=source,
            details=details,
        )
    if off:
        cause = ""
        if nics.fabric == "infiniband" and not fab.modules.get("nvidia_peermem"):
            cause = " (nvidia_peermem is not loaded)"
        return bad(
            Action.BLOCK_IMAGE,
            f"NCCL sees no GPUDirect RDMA on {len(off)} of {len(flags)} NIC(s) "
            f"({', '.join(off)}){cause}: traffic would be staged through host memory",
            measured={n: int(g) for n, g in flags.items()},
            expected="gdr=1 on every fabric NIC",
            source=source,
            details=details,
        )
    return ok(
        f"gdr=1 on {len(flags)} NIC(s)",
        measured=len(flags),
        expected=len(flags),
        source=source,
        details=details,
    )


def selected_by(value: str, names: list[str], *, exact: bool = False) -> list[str]:
    """The NICs of ``names`` a NIC list selects: NCCL_IB_HCA's 'mlx5_0:1,mlx5_1' (prefixes;
    '=' exact names; '^' excludes) or FI_EFA_IFACE's comma-separated device names."""
    v = value.strip()
    exclude = v.startswith("^")
    v = v.lstrip("^")
    exact = exact or v.startswith("=")
    items = [i.split(":")[0].strip() for i in v.lstrip("=").split(",") if i.strip()]

    def hit(name: str) -> bool:
        return any(name == i if exact else name.startswith(i) for i in items)

    return [n for n in names if hit(n) != exclude]


def healthy_rails(ctx: Context) -> list[str]:
    """The host's NICs of the shape's fabric that NCCL can use: present with every port
    ACTIVE (and LinkUp on InfiniBand). A NIC that is missing or down is the host's fault,
    judged by the fabric's device and port checks, not counted against NCCL."""
    nics = shape_nics(ctx)
    fab = section(ctx)
    policy = fabric_policy()
    if nics is not None and nics.fabric == "gvnic":
        running = {n.name for n in gvnic_devices(fab) if (n.operstate or "") == "up"}
        return [n for n in fabric_nics(ctx) if n in running]
    if nics is not None and nics.fabric == "roce":
        devs = roce_devices(fab)
    else:
        devs = efa_devices(fab) if nics is not None and nics.fabric == "efa" else ib_devices(fab)
    out = []
    for d in devs:
        up = d.ports and all(sysfs_state(p.state)[0] == policy.state_active for p in d.ports)
        if up and d in ib_devices(fab):
            up = all(
                sysfs_state(p.phys_state)[0] == policy.phys_linkup and port_rate(p.rate)
                for p in d.ports
            )
        if up:
            out.append(d.name)
    return out


@check(
    "fabric.nccl.rails",
    "NCCL opens every healthy rail the shape has (NCCL_IB_HCA and the like leave none unused)",
    needs_nvml=False,
    profiles=LOADED_PROFILES,
    timeout_s=150.0,
)
def nccl_rails(ctx: Context) -> Finding:
    if isinstance(found := nccl_evidence(ctx), Finding):
        return found
    nics, run = found
    rule = fabric_policy().nccl_rails
    wanted_settings = list((rule.extra or {}).get("settings") or [])
    logged = nccl_settings(run.run.stdout)
    settings = {k: v for k, v in {**run.env, **logged}.items() if k in wanted_settings}
    seen = nccl_net(run.run.stdout)
    rails = healthy_rails(ctx)
    evidence: dict[str, int] = {}
    names: list[str] = []
    if nics.fabric == "efa" and seen.ofi_nics is not None:
        evidence["aws-ofi-nccl found"] = seen.ofi_nics
    if nics.fabric in ("infiniband", "roce") and seen.ib_devices:
        names = seen.ib_devices
        evidence["NET/IB : Using"] = len(seen.ib_devices)
    if run.topo_xml:
        topo = nccl_topology(run.topo_xml)
        listed = len([n for n in topo.gdr if n in rails]) if not topo.error else 0
        if listed:  # none matching: its names are not the host's, so it says nothing here
            evidence["NCCL's topology dump"] = listed
    ifname = net_rule(nics).ifname  # the plugin's own list of GPU NICs (gVNIC)
    exact_lists = ("FI_EFA_IFACE", "NCCL_FASTRAK_IFNAME", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME")
    for var in ("NCCL_IB_HCA", "FI_EFA_IFACE", *([ifname] if ifname else [])):
        if var in settings:
            evidence[var] = len(selected_by(settings[var], rails, exact=var in exact_lists))
    opened: int | None = min(evidence.values()) if evidence else None
    where = {
        "efa": "aws-ofi-nccl's 'Selected provider is efa ... (found N nics)'",
        "gvnic": f"the plugin's interface list ({ifname or 'none for this kind'})",
    }.get(nics.fabric, "NCCL's 'NET/IB : Using [0]<hca>:1/...'")
    details = {
        "nccl_opened": names or opened,
        "evidence": evidence,
        "healthy_rails": rails,
        "settings": settings,
        "attribution": "image",
    }
    if opened is None:
        return inconclusive(
            f"NCCL's log does not say how many NICs it opened (no {where} line)",
            ["NCCL_DEBUG=INFO NET line"],
            details=details,
        )
    expected = len(rails)
    source = f"{rule.source}; {nics.source}"
    if opened < expected:
        unused = sorted(set(rails) - set(names)) if names else []
        set_by = (
            "; set by " + ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
            if settings
            else ""
        )
        return bad(
            rule.action,
            f"NCCL opened {opened} of the host's {expected} healthy {LABEL[nics.fabric]} "
            f"rails{set_by}"
            + (f" (unused: {', '.join(unused)})" if unused else "")
            + ": every job on this image runs at that fraction of the shape's network "
            "bandwidth; remove the setting from the image",
            measured=opened,
            expected=expected,
            unit="NICs",
            source=f"{source}; imagectl policy: {rule.reason}",
            details=details,
        )
    return ok(
        f"NCCL opened {opened} of {expected} healthy rails",
        measured=opened,
        expected=expected,
        unit="NICs",
        source=source,
        details=details,
    )
