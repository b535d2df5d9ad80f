"""GPU-NIC topology: each GPU has its nearest fabric NIC(s) as the shape documents (behind the
same PCIe switch, ``nvidia-smi topo -m``'s PIX/PXB; or the pairs a shape documents where the
guest hides the switches), and NCCL's own topology detection agrees (quick, full, burn)."""

from __future__ import annotations

from imagectl.validators.checks.base import LOADED_PROFILES, check
from imagectl.validators.checks.fabric_nccl import healthy_rails, nccl_evidence
from imagectl.validators.context import Context
from imagectl.validators.fabric.applies import (
    SHAPES,
    inconclusive,
    not_applicable,
    section,
    shape_nics,
)
from imagectl.validators.fabric.parse import nccl_topology
from imagectl.validators.fabric.topology import expected_nearest, gpus, switch_of
from imagectl.validators.findings import Finding, bad, ok, skip
from imagectl.validators.results import Action

SYSFS = (
    "Linux sysfs /sys/bus/pci/devices (a function's path names the bridges above it); "
    "NVIDIA nvidia-smi topo -m: PIX/PXB = through PCIe switch(es) only, not the host bridge"
)


@check(
    "fabric.topology", "Each GPU's nearest fabric NIC(s) as the shape documents", needs_nvml=False
)
def topology(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, needs_software=False)) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    fab = section(ctx)
    if not gpus(fab):
        return skip("no GPU on the PCI bus was recorded")
    if nics.fabric == "gvnic" and fab.netdevs is None:
        return inconclusive(
            "the snapshot records no network interfaces (fabric.netdevs: captured before "
            "they were recorded): which gVNIC is each GPU's is unknown",
            ["snapshot fabric.netdevs"],
        )
    no_switch = all(switch_of(g) is None for g in gpus(fab))
    if not nics.gpu_nic_pairs and nics.nics_per_gpu and no_switch:
        # the guest shows no PCIe switch above any GPU (each device in its own PCI domain)
        # and the shape documents no pairing: which NIC is a GPU's is not known here
        return inconclusive(
            f"the guest shows no PCIe switch above any GPU and shape {ctx.expect.shape} "
            f"documents no GPU-NIC pairing (nics.gpu_nic_pairs in {SHAPES}, from the "
            "vendor's NCCL topology file)",
            [f"{SHAPES} {ctx.expect.shape}: nics.gpu_nic_pairs"],
        )
    near = expected_nearest(fab, nics)
    short = {
        g: found
        for g, found in near.items()
        if len([n for n in found if not n.startswith("(missing")]) < nics.nics_per_gpu
    }
    details = {"nearest": near, "attribution": "node"}
    how = (
        "documented GPU-NIC pairs" if nics.gpu_nic_pairs else "GPUs and NICs behind one PCIe switch"
    )
    source = f"{nics.source}; {SYSFS}"
    if short:
        return bad(
            Action.DRAIN,
            f"{len(short)} GPU(s) without their {nics.nics_per_gpu} nearest fabric NIC(s) "
            f"({how}): "
            + "; ".join(f"{g}: {', '.join(f) or 'none'}" for g, f in sorted(short.items())),
            measured=near,
            expected=f"{nics.nics_per_gpu} per GPU",
            source=source,
            details=details,
        )
    return ok(
        f"every GPU has its nearest NIC(s) ({how})",
        measured=near,
        expected=f"{nics.nics_per_gpu} per GPU",
        source=source,
        details=details,
    )


@check(
    "fabric.topology.nccl",
    "NCCL's topology detection agrees on each GPU's nearest NIC(s)",
    needs_nvml=False,
    profiles=LOADED_PROFILES,
    timeout_s=150.0,
)
def nccl_agrees(ctx: Context) -> Finding:
    if isinstance(found := nccl_evidence(ctx, topology=True), Finding):
        return found
    nics, run = found
    assert run.topo_xml is not None
    topo = nccl_topology(run.topo_xml)
    # judged on the host's healthy NICs and those NCCL lists: a port that is down and that
    # NCCL leaves out is the host's (fabric.ib.ports); a healthy NIC NCCL leaves out is what
    # this check must see (its rails unused)
    rails = set(healthy_rails(ctx)) | set(topo.gdr)
    want = {
        g: sorted(n for n in w if n in rails)
        for g, w in expected_nearest(section(ctx), nics).items()
    }
    differ = {
        g: {"nccl": topo.nearest.get(g, []), "host": w}
        for g, w in want.items()
        if g in topo.nearest and sorted(topo.nearest[g]) != w
    }
    topo_file = run.env.get("NCCL_TOPO_FILE")
    details = {"nccl_topo_file": topo_file, "nccl": topo.nearest, "attribution": "node"}
    source = (
        "NVIDIA NCCL NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE (environment variables documentation)"
    )
    if topo.error:
        return bad(
            Action.BLOCK_IMAGE,
            f"NCCL's topology dump: {topo.error}",
            source=source,
            details=details,
        )
    if differ:
        return bad(
            Action.BLOCK_IMAGE,
            f"NCCL pairs {len(differ)} GPU(s) with other NICs than the host's topology "
            + (f"(NCCL_TOPO_FILE={topo_file} does not describe this host)" if topo_file else "")
            + ": "
            + "; ".join(
                f"{g}: NCCL {d['nccl']}, host {d['host']}" for g, d in sorted(differ.items())
            ),
            measured=topo.nearest,
            expected=want,
            source=source,
            details={**details, "differ": differ},
        )
    return ok(
        f"NCCL agrees for {len(want)} GPU(s)",
        measured=topo.nearest,
        expected=want,
        source=source,
        details=details,
    )
