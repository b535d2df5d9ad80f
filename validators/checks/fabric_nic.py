"""Every NIC the shape's GPUs use, whatever its kind (EFA, InfiniBand, RoCE, gVNIC): all of
them present (for RoCE and gVNIC; EFA and InfiniBand have their own device checks), each one's
PCIe link at what the link can do, no ACS redirect between a GPU and its NIC where the shape
uses GPUDirect, and EFA's own error counters not rising while the capture watches. The rules
and their sources are data (``data/fabric.yaml``: nic_pcie, acs, efa_hw_counters).

These judge the host's hardware, so they apply whether or not the image pins the fabric's
software. A fact the shape or an older snapshot does not give makes the check inconclusive,
with the missing field named."""

from __future__ import annotations

import re
from typing import Any

from imagectl.validators.checks.base import check
from imagectl.validators.context import Context
from imagectl.validators.fabric.applies import (
    LABEL,
    inconclusive,
    missing_facts,
    not_applicable,
    section,
    shape_nics,
)
from imagectl.validators.fabric.model import FabricSection, PciFunction
from imagectl.validators.fabric.parse import (
    efa_devices,
    fabric_devices,
    gvnic_devices,
    pci_address,
    port_rate,
    roce_devices,
    sysfs_state,
)
from imagectl.validators.fabric.policy import fabric_policy
from imagectl.validators.fabric.topology import expected_nearest
from imagectl.validators.findings import Finding, bad, ok, skip, warn
from imagectl.validators.nics import Nics
from imagectl.validators.results import Action

_GTS = re.compile(r"^\s*([\d.]+)\s*GT/s")


@check(
    "fabric.nics.count",
    "Every RoCE / gVNIC GPU NIC the shape has is present and up",
    needs_nvml=False,
)
def nic_count(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, needs_software=False)) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    if nics.fabric not in ("roce", "gvnic"):
        return skip(
            f"{LABEL[nics.fabric]}: judged by its own device check "
            "(fabric.efa.devices / fabric.ib.hcas)"
        )
    needed = ("count", "host_nics") if nics.fabric == "gvnic" else ("count",)
    if (why := missing_facts(ctx, *needed)) is not None:
        return why
    fab = section(ctx)
    policy = fabric_policy()
    if nics.fabric == "gvnic":
        if fab.netdevs is None:
            return inconclusive(
                "the snapshot records no network interfaces (fabric.netdevs: captured before "
                "they were recorded); the gVNIC count is unknown",
                ["snapshot fabric.netdevs"],
            )
        devs = gvnic_devices(fab)
        want = nics.count + nics.host_nics
        down = [n.name for n in devs if (n.operstate or "unknown") != "up"]
        names = [n.name for n in devs]
    else:
        rdma = roce_devices(fab)
        want = nics.count
        down = [
            d.name
            for d in rdma
            if not d.ports or any(sysfs_state(p.state)[0] != policy.state_active for p in d.ports)
        ]
        names = [d.name for d in rdma]
    details: dict[str, Any] = {"nics": names, "attribution": "node"}
    if len(names) < want:
        extra = f" ({nics.count} for GPUs + {nics.host_nics} host)" if nics.host_nics else ""
        return bad(
            Action.DRAIN,
            f"{len(names)} of the shape's {want} {LABEL[nics.fabric]}{extra} present: the "
            "instance came up without NICs its GPUs use; launch it again with every NIC",
            measured=len(names),
            expected=want,
            unit="NICs",
            source=nics.source,
            details=details,
        )
    if down:
        return bad(
            Action.DRAIN,
            f"{LABEL[nics.fabric]} not up: {', '.join(sorted(down))}",
            measured=len(names) - len(down),
            expected=want,
            unit="NICs",
            source=f"{nics.source}; {policy.state_source}",
            details={**details, "not_up": sorted(down), "attribution": "link"},
        )
    return ok(
        f"{len(names)} {LABEL[nics.fabric]}, all up",
        measured=len(names),
        expected=want,
        unit="NICs",
        source=nics.source,
        details=details,
    )


def _speed(text: str | None) -> float | None:
    m = _GTS.match(text or "")
    return float(m[1]) if m else None


def _width(text: str | None) -> int | None:
    try:
        return int(str(text).strip().lstrip("x"))
    except ValueError:
        return None


def _fabric_functions(fab: FabricSection, fabric: str) -> dict[str, PciFunction | None]:
    """NIC name -> its recorded PCI function (None: not recorded)."""
    by_addr = {pci_address(f.address): f for f in fab.pci}
    return {
        name: (by_addr.get(pci_address(pci)) if pci else None)
        for name, pci in fabric_devices(fab, fabric).items()
    }


@check(
    "fabric.nic.pcie", "Each GPU NIC's PCIe link at its maximum speed and width", needs_nvml=False
)
def nic_pcie(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, needs_software=False)) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    fab = section(ctx)
    rule = fabric_policy().nic_pcie
    functions = _fabric_functions(fab, nics.fabric)
    if nics.fabric == "gvnic" and fab.netdevs is None:
        return inconclusive(
            "the snapshot records no network interfaces (fabric.netdevs); the gVNICs' PCIe "
            "links are unknown",
            ["snapshot fabric.netdevs"],
        )
    if not functions:
        return skip(f"no {LABEL[nics.fabric]} on the host to judge (its count check says why)")
    measured: dict[str, str] = {}
    slow: dict[str, str] = {}
    unknown: list[str] = []
    for name, fn in sorted(functions.items()):
        link = fn.link if fn is not None else None
        cur_s, max_s = (_speed(link.current_speed), _speed(link.max_speed)) if link else (None,) * 2
        cur_w, max_w = (_width(link.current_width), _width(link.max_width)) if link else (None,) * 2
        if link is None or None in (cur_s, max_s, cur_w, max_w):
            unknown.append(name)
            continue
        assert cur_s is not None and max_s is not None and cur_w is not None and max_w is not None
        measured[name] = f"{cur_s:g} GT/s x{cur_w} (max {max_s:g} GT/s x{max_w})"
        if cur_s < max_s or cur_w < max_w:
            slow[name] = measured[name]
    details = {"unknown": unknown, "attribution": "node"}
    if slow:
        return bad(
            rule.action,
            f"{len(slow)} NIC(s) on a PCIe link below their maximum: "
            + "; ".join(f"{k}: {v}" for k, v in slow.items())
            + ": the NIC cannot reach its line rate; drain the host (reseat or replace the "
            "card, or have the provider look)",
            measured=measured,
            expected="current speed and width = max",
            source=rule.source,
            details={**details, "downgraded": slow},
        )
    if unknown:
        return inconclusive(
            f"the PCIe link of {len(unknown)} NIC(s) is not recorded or unreadable "
            f"({', '.join(unknown[:8])}): an older snapshot, or sysfs without "
            "current_link_speed/max_link_speed",
            [f"snapshot fabric.pci[{n}].link" for n in unknown],
            details={"measured": measured},
        )
    return ok(
        f"{len(measured)} NIC(s) at their maximum link",
        measured=measured,
        expected="current speed and width = max",
        source=rule.source,
        details=details,
    )


def _between(gpu: PciFunction, nic: PciFunction) -> list[str]:
    """The bridges on the path between a GPU and a NIC below their common PCIe switch;
    [] when they share none (different root ports, or every device in its own domain)."""
    common = 0
    for a, b in zip(gpu.upstream, nic.upstream, strict=False):
        if a != b:
            break
        common += 1
    if common < 2:  # no shared switch (a root port alone routes peer traffic via the host)
        return []
    return gpu.upstream[common:] + nic.upstream[common:]


@check(
    "fabric.acs",
    "No ACS redirect between a GPU and its NIC (GPUDirect RDMA / TCPX / TCPXO)",
    needs_nvml=False,
)
def acs(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, needs_software=False)) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    if (why := missing_facts(ctx, "gpudirect")) is not None:
        return why
    if nics.gpudirect in (None, "none"):
        return skip(f"shape {ctx.expect.shape} uses no GPUDirect (nics.gpudirect none)")
    fab = section(ctx)
    rule = fabric_policy().acs
    bits: dict[str, int] = dict((rule.extra or {}).get("redirect_bits") or {})
    by_addr = {pci_address(f.address): f for f in fab.pci}
    nic_addr = {n: pci_address(p) for n, p in fabric_devices(fab, nics.fabric).items() if p}
    paths: dict[str, list[str]] = {}
    for gpu, near in expected_nearest(fab, nics).items():
        g = by_addr.get(pci_address(gpu))
        for name in near:
            n = by_addr.get(nic_addr.get(name, ""))
            if g is not None and n is not None and (bridges := _between(g, n)):
                paths[f"{g.address} <-> {name}"] = bridges
    if not paths:
        return skip(
            "no PCI bridge between any GPU and its NIC is visible to the guest (each in its own "
            "PCI domain, or no shared switch): ACS there is the hypervisor's, not judged here"
        )
    if fab.acs is None:
        return inconclusive(
            "the snapshot records no ACS control bits (fabric.acs: captured before they were "
            "recorded)",
            ["snapshot fabric.acs"],
        )
    redirect: dict[str, dict[str, str]] = {}
    unknown: set[str] = set()
    for path, bridges in paths.items():
        for bridge in bridges:
            if bridge not in fab.acs:
                unknown.add(bridge)
                continue
            ctl = fab.acs[bridge]
            on = [name for name, bit in bits.items() if ctl is not None and ctl >> bit & 1]
            if on:
                redirect.setdefault(path, {})[bridge] = f"ACSCtl {ctl:#06x}: {'+ '.join(on)}+"
    measured = {b: fab.acs.get(b) for bs in paths.values() for b in bs}
    details = {"paths": paths, "attribution": "node"}
    if redirect:
        bridges = sorted({b for v in redirect.values() for b in v})
        return bad(
            rule.action,
            f"ACS redirect on {len(bridges)} bridge(s) between a GPU and its NIC "
            f"({', '.join(bridges)}): peer-to-peer traffic (GPUDirect) goes up to the root "
            "complex; drain the host",
            measured=measured,
            expected="ReqRedir- CmpltRedir- on every bridge between a GPU and its NIC",
            source=f"{rule.source}; imagectl policy: {rule.reason}",
            details={**details, "redirect": redirect},
        )
    if unknown:
        return inconclusive(
            f"the ACS control bits of {len(unknown)} bridge(s) between a GPU and its NIC were "
            f"not read ({', '.join(sorted(unknown))}: reading them needs root)",
            [f"snapshot fabric.acs[{b}]" for b in sorted(unknown)],
        )
    return ok(
        f"no ACS redirect on the {len(measured)} bridge(s) between GPUs and their NICs",
        measured=measured,
        expected="ReqRedir- CmpltRedir-",
        source=rule.source,
        details=details,
    )


@check(
    "fabric.efa.counters",
    "EFA error counters (hw_counters) not rising while watched",
    needs_nvml=False,
)
def efa_counters(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, "efa", needs_software=False)) is not None:
        return why
    fab = section(ctx)
    rule = fabric_policy().efa_hw
    judged: list[str] = list((rule.extra or {}).get("rising_fails") or [])
    ports = [(d.name, p) for d in efa_devices(fab) for p in d.ports]
    if not ports:
        return skip("no EFA device to judge (fabric.efa.devices says why)")
    if all(p.hw_counters is None for _, p in ports):
        return inconclusive(
            "the snapshot records no EFA hw_counters (captured before they were recorded)",
            ["snapshot fabric.rdma[].ports[].hw_counters"],
        )
    if all(p.hw_counters_after is None for _, p in ports):
        return inconclusive(
            "EFA hw_counters were read once: a rise cannot be judged",
            ["snapshot fabric.rdma[].ports[].hw_counters_after"],
        )
    warned: list[str] = list((rule.extra or {}).get("rising_warns") or [])
    rising: dict[str, dict[str, Any]] = {}
    noted: dict[str, dict[str, Any]] = {}
    totals: dict[str, dict[str, int]] = {}
    for name, port in ports:
        first, after = port.hw_counters or {}, port.hw_counters_after or {}
        key = f"{name}/{port.port}"
        for counter in judged + warned:
            if counter in first and counter in after and after[counter] > first[counter]:
                into = rising if counter in judged else noted
                into.setdefault(key, {})[counter] = {
                    "from": first[counter],
                    "to": after[counter],
                    "over_s": fab.interval_s,
                }
            elif first.get(counter):
                totals.setdefault(key, {})[counter] = first[counter]
    details = {"interval_s": fab.interval_s, "counts": totals, "attribution": "link"}
    if rising:
        return bad(
            rule.action,
            "EFA error counters rising while the host was idle: "
            + "; ".join(
                f"{k} {c} {v['from']} -> {v['to']}"
                for k, cs in rising.items()
                for c, v in cs.items()
            )
            + f" in {fab.interval_s:g} s: drain the host",
            measured=rising,
            expected=f"none of {', '.join(judged)} rising",
            source=f"{rule.source}; imagectl policy: {rule.reason}",
            details=details,
        )
    if noted:
        return warn(
            "EFA receive drops rising on the idle host: "
            + "; ".join(
                f"{k} {c} {v['from']} -> {v['to']}"
                for k, cs in noted.items()
                for c, v in cs.items()
            ),
            measured=noted,
            expected=f"none of {', '.join(warned)} rising",
            source=rule.source,
            details=details,
        )
    return ok(
        f"no EFA error counter rose in {fab.interval_s:g} s",
        measured=totals,
        expected=f"none of {', '.join(judged)} rising",
        source=rule.source,
        details=details,
    )


def _gpu_gvnics(fab: FabricSection, nics: Nics) -> set[str]:
    """The gVNICs nearest a GPU (the GPU NICs; the primary beside them is not one)."""
    near = expected_nearest(fab, nics)
    return {n for found in near.values() for n in found if not n.startswith("(missing")}


@check(
    "fabric.nic.rate",
    "Each GPU NIC's link at the shape's rate (RoCE port rate, gVNIC speed, EFA's reported rate)",
    needs_nvml=False,
)
def nic_rate(ctx: Context) -> Finding:
    if (why := not_applicable(ctx, needs_software=False)) is not None:
        return why
    nics = shape_nics(ctx)
    assert nics is not None
    if nics.fabric == "infiniband":
        return skip("InfiniBand: its rate, width and speed are judged by fabric.ib.ports")
    if (why := missing_facts(ctx, "rate_gbps")) is not None:
        return why
    assert nics.rate_gbps is not None
    fab = section(ctx)
    rule = fabric_policy().nic_rate
    extra = rule.extra or {}
    source = f"{extra.get(nics.fabric, rule.source)}; {nics.source}"
    want = float(nics.rate_gbps)
    measured: dict[str, str] = {}
    slow: dict[str, str] = {}
    unknown: list[str] = []
    if nics.fabric == "gvnic":
        if fab.netdevs is None:
            return inconclusive(
                "the snapshot records no network interfaces (fabric.netdevs); the gVNICs' "
                "link speed is unknown",
                ["snapshot fabric.netdevs"],
            )
        gpu_nics = _gpu_gvnics(fab, nics)
        for n in gvnic_devices(fab):
            if gpu_nics and n.name not in gpu_nics:
                continue
            if n.speed_mbps is None or n.speed_mbps <= 0:
                unknown.append(n.name)
                continue
            gbps = n.speed_mbps / 1000.0
            measured[n.name] = f"{gbps:g} Gb/s"
            if gbps < want:
                slow[n.name] = measured[n.name]
    else:
        devs = roce_devices(fab) if nics.fabric == "roce" else efa_devices(fab)
        fixed = str(extra.get("efa_fixed") or "")
        for d in devs:
            for p in d.ports:
                key = f"{d.name}/{p.port}"
                rate = port_rate(p.rate)
                if rate is None:
                    unknown.append(key)
                    continue
                measured[key] = p.rate or ""
                if nics.fabric == "efa" and (p.rate or "").strip() == fixed and rate.gbps < want:
                    unknown.append(key)  # an older efa driver's fixed report, not the card's
                elif rate.gbps < want:
                    slow[key] = p.rate or ""
    details = {"unknown": unknown, "attribution": "link"}
    expected = f">= {want:g} Gb/s per NIC"
    if slow:
        return bad(
            rule.action,
            f"{len(slow)} GPU NIC(s) below the shape's {want:g} Gb/s: "
            + "; ".join(f"{k}: {v}" for k, v in sorted(slow.items()))
            + ": the link trained slower than the shape's rate; drain the host",
            measured=measured,
            expected=expected,
            source=f"{source}; imagectl policy: {rule.reason}",
            details={**details, "slow": slow},
        )
    if not measured and not unknown:
        return skip(f"no {LABEL[nics.fabric]} on the host to judge (its count check says why)")
    if unknown and not measured:
        return inconclusive(
            f"the rate of {len(unknown)} NIC(s) is not readable or not the card's "
            f"({', '.join(unknown[:8])})",
            [f"fabric rate of {n}" for n in unknown[:8]],
            details={"measured": measured},
        )
    return ok(
        f"{len(measured)} GPU NIC(s) at >= {want:g} Gb/s"
        + (f" ({len(unknown)} not judged: {', '.join(unknown[:4])})" if unknown else ""),
        measured=measured,
        expected=expected,
        source=source,
        details=details,
    )
