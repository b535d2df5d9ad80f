"""Fault classes of shape truth: what every GPU shape's NICs are, from the vendors'
documents (images/catalog/shapes.yaml), and the interconnect and memory judged against it.
Each verdict was written from the document before the validator was asked; one sick case
and one healthy control per class:

1. The shape's GPU-NIC pairing. ND A100 v4 / NDm A100 v4 put every GPU and HCA in its own
   PCI domain; Azure/azhpc-images topology/ndv4-topo.xml groups two GPUs and two HCAs per
   virtual switch, so both HCAs of a group are each GPU's nearest. Healthy: passes (it was
   drained for "no nearest NIC"); a lost HCA drains and leaves its two GPUs one NIC short. A
   shape that documents no pairing where the guest shows no switch is inconclusive, never
   drained.
2. Every NIC of the shape present: p5en.48xlarge has 16 EFA (EC2 network specifications);
   15 drains (it passed: the shape had no NIC block). a3-megagpu-8g has 8 gVNIC GPU NICs
   plus the primary (Google Cloud "Networking and GPU machines"); 7 drain.
3. NCCL's rails: NCCL_IB_HCA baked to four of eight HCAs (NCCL environment variables) or
   FI_EFA_IFACE to half the EFAs leaves rails unused on every host: BLOCK_IMAGE. A rail
   whose port is down is the host's (fabric.ib.ports), not NCCL's: the existing
   ib-port-down case is the control.
4. NIC PCIe downgrade: a NIC's current link below its maximum (Linux pcie_print_link_status;
   sysfs current_/max_link_*): DRAIN.
5. ACS: ReqRedir+ CmpltRedir+ on a bridge between a GPU and its NIC (NCCL troubleshooting,
   "PCI Access Control Services"): DRAIN. SrcValid alone is fine; Azure's own-domain guests
   show no bridge (not judged).
6. Saturated IB error counters: symbol_error at 65535 (16-bit) and link_downed at 255 (8-bit)
   stop there (IBTA PortCounters; Linux sysfs PORT_PMA_ATTR widths): judged saturated,
   DRAIN, not "not rising" (a warning). The settled-count case stays a warning.
7. EFA error counters rising while the idle host is watched (efa hw_counters:
   retrans_pkts, retrans_timeout_events, unresponsive_remote_events,
   impaired_remote_conn_events, rdma_*_wr_err): DRAIN; counts that do not rise are history
   (pass); rx_drops rising warns.
8. Spare rows: a bank with no reserved row left in NVML's row-remapper histogram cannot
   absorb its next uncorrectable error (GPU Memory Error Management, RMA Policy): DRAIN; a
   bank at "low" warns; "partial" passes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from niclib import (
    NDV4_GROUPS,
    efa_layout,
    fi_info_efa,
    ib_topo_xml,
    nccl_efa_log,
    nccl_ib_log,
    nccl_ndv4_log,
    ndv4_hca_names,
    ndv4_topo_xml,
)
from snaplib import BASES, Fault, Snap, expectations, gpu_set

P5, ND = "h100-p5-efa", "h100-ndv5-ib"
ND4, P5EN, MEGA = "a100-ndv4-ib", "h200-p5en-efa", "h100-a3mega-tcpxo"
H100, A100 = "h100-sxm-8x", "a100-sxm-80gb-8x"

NDV4 = (
    "Azure/azhpc-images topology/ndv4-topo.xml (two GPUs and two HCAs under each virtual "
    "switch ffff:ff:0N.0; the guest sees every device in its own PCI domain); Azure NDm A100 "
    "v4 series: 8 x 200 Gb/s HDR InfiniBand"
)
EC2_NET = (
    "AWS EC2 User Guide, accelerated computing network specifications (p5en.48xlarge: 16 "
    "network cards, EFAv3)"
)
GCP_NET = (
    "Google Cloud 'Networking and GPU machines' (a3-megagpu-8g: 8 gVNIC NICs for GPUDirect-"
    "TCPXO plus the primary NIC)"
)
RAILS = (
    "NVIDIA NCCL environment variables (NCCL_IB_HCA selects the RDMA interfaces NCCL uses; "
    "INFO 'NCCL_IB_HCA set by environment to ...', 'NET/IB : Using ...'); aws-ofi-nccl "
    "'Selected provider is efa ... (found N nics)'; libfabric fi_efa(7) FI_EFA_IFACE"
)
PCIE = (
    "Linux drivers/pci/pci.c pcie_print_link_status ('limited by ... x<width> link'); "
    "Documentation/ABI/testing/sysfs-bus-pci current_link_speed/width, max_link_speed/width"
)
ACS = (
    "NVIDIA NCCL Troubleshooting, PCI Access Control Services: ACS redirects peer-to-peer "
    "traffic to the root complex (disable it); PCIe ACS Control bits 2 ReqRedir, 3 CmpltRedir"
)
SATURATED = (
    "IBTA PortCounters: SymbolErrorCounter 16 bits, LinkDownedCounter 8 bits, error counters "
    "stop at their maximum; Linux drivers/infiniband/core/sysfs.c PORT_PMA_ATTR widths"
)
EFA_HW = (
    "Linux drivers/infiniband/hw/efa efa_com_cmd.h network and RDMA stats (hw_counters); AWS "
    "EFA documentation (retrans_timeout_events: SRD timed out and changed path; "
    "impaired_remote_conn_events: a connection entered an impaired state)"
)
SPARE = (
    "NVML nvmlRowRemapperHistogramValues_t (none: no reserved rows available); NVIDIA GPU "
    "Memory Error Management, RMA Policy (a remap attempt for an uncorrectable error on a "
    "bank with eight uncorrectable rows remapped sets the failure flag)"
)


def _fabric(s: Snap) -> dict[str, Any]:
    fab: dict[str, Any] = s["fabric"]
    return fab


def _noop(s: Snap) -> None:
    del s


def drop_hca(name: str) -> Callable[[Snap], None]:
    """An HCA gone from an ND A100 v4 host: sysfs, its PCI function, NCCL's view."""

    def apply(s: Snap) -> None:
        fab = _fabric(s)
        addr = next(d["pci"] for d in fab["rdma"] if d["name"] == name)
        fab["rdma"] = [d for d in fab["rdma"] if d["name"] != name]
        fab["pci"] = [f for f in fab["pci"] if f["address"] != addr]
        fab["netdevs"] = [n for n in fab["netdevs"] if n["pci"] != addr]
        names = {a: n for a, n in ndv4_hca_names().items() if n != name}
        fab["nccl"]["run"]["stdout"] = nccl_ndv4_log(sorted(names.values()))
        fab["nccl"]["topo_xml"] = ndv4_topo_xml(names)

    return apply


def drop_efa(name: str) -> Callable[[Snap], None]:
    """One EFA device gone from the host: sysfs, fi_info, NCCL's view."""

    def apply(s: Snap) -> None:
        fab = _fabric(s)
        addr = next(d["pci"] for d in fab["rdma"] if d["name"] == name)
        fab["rdma"] = [d for d in fab["rdma"] if d["name"] != name]
        fab["pci"] = [f for f in fab["pci"] if f["address"] != addr]
        left = [d["name"] for d in fab["rdma"]]
        fab["fi_info"]["stdout"] = fi_info_efa(left)
        fab["nccl"]["run"]["stdout"] = nccl_efa_log(len(left))
        fab["nccl"]["topo_xml"] = re.sub(
            rf"<nic><net name=\"{name}\"[^>]*/></nic>", "", fab["nccl"]["topo_xml"]
        )

    return apply


def drop_netdev(name: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        fab = _fabric(s)
        addr = next(n["pci"] for n in fab["netdevs"] if n["name"] == name)
        fab["netdevs"] = [n for n in fab["netdevs"] if n["name"] != name]
        fab["pci"] = [f for f in fab["pci"] if f["address"] != addr]

    return apply


def ib_hca_env(hcas: list[str]) -> Callable[[Snap], None]:
    """The image bakes NCCL_IB_HCA to ``hcas``: NCCL opens only those (its log says so, its
    topology dump has only their nets)."""
    value = ",".join(hcas)
    line = f"nd-node:4242:4242 [0] NCCL INFO NCCL_IB_HCA set by environment to {value}\n"

    def apply(s: Snap) -> None:
        fab = _fabric(s)
        if "ndv4" in fab["nccl"]["env"].get("NCCL_TOPO_FILE", ""):
            fab["nccl"]["run"]["stdout"] = nccl_ndv4_log(hcas, settings=line)
            names = {a: n for a, n in ndv4_hca_names().items() if n in hcas}
            fab["nccl"]["topo_xml"] = ndv4_topo_xml(names)
        else:
            fab["nccl"]["run"]["stdout"] = nccl_ib_log(hcas, settings=line)
            addrs = {f"01{i:02x}:00:00.0": f"mlx5_ib{i - 1}" for i in range(1, 9)}
            fab["nccl"]["topo_xml"] = ib_topo_xml({a: n for a, n in addrs.items() if n in hcas})
        fab["nccl"]["env"]["NCCL_IB_HCA"] = value

    return apply


def efa_iface_env(keep: int) -> Callable[[Snap], None]:
    """The image sets FI_EFA_IFACE to ``keep`` of the EFA devices: aws-ofi-nccl finds those."""

    def apply(s: Snap) -> None:
        fab = _fabric(s)
        names = [d["name"] for d in fab["rdma"]][:keep]
        fab["nccl"]["env"]["FI_EFA_IFACE"] = ",".join(names)
        fab["nccl"]["run"]["stdout"] = nccl_efa_log(keep)
        xml = fab["nccl"]["topo_xml"]
        for d in fab["rdma"][keep:]:
            xml = re.sub(rf"<nic><net name=\"{d['name']}\"[^>]*/></nic>", "", xml)
        fab["nccl"]["topo_xml"] = xml

    return apply


def link_set(address: str, **fields: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        fn = next(f for f in _fabric(s)["pci"] if f["address"] == address)
        fn["link"].update(fields)

    return apply


def acs_set(bridge: str, value: int) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        _fabric(s)["acs"][bridge] = value

    return apply


def ib_counter(hca: str, name: str, first: int, after: int) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        dev = next(d for d in _fabric(s)["rdma"] if d["name"] == hca)
        dev["ports"][0]["counters"][name] = first
        dev["ports"][0]["counters_after"][name] = after

    return apply


def port_down(hca: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        dev = next(d for d in _fabric(s)["rdma"] if d["name"] == hca)
        dev["ports"][0].update(state="1: DOWN", phys_state="3: Disabled")

    return apply


def efa_hw(dev: str, **counters: tuple[int, int]) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        port = next(d for d in _fabric(s)["rdma"] if d["name"] == dev)["ports"][0]
        for name, (first, after) in counters.items():
            port["hw_counters"][name] = first
            port["hw_counters_after"][name] = after

    return apply


def histogram(**buckets: int) -> dict[str, int]:
    out = {"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0}
    out.update(buckets)
    out["max"] -= sum(buckets.values())
    return out


def _no_pairs(base: str) -> dict[str, Any]:
    """The base's expectations with the shape's GPU-NIC pairing left out (an older catalog)."""
    hw = copy.deepcopy(expectations(base)["hardware"])
    hw["nics"]["gpu_nic_pairs"] = {}
    hw["nics"].pop("pairing", None)
    return {"hardware": hw}


# p5en: GPU 2 (bus 0x4c) has rdmap77s0 and rdmap78s0 behind its switch
P5EN_GPU2 = efa_layout(BASES[P5EN]["buses"], per_gpu=2)[2]
MEGA_GPU4 = {"nic": "eth5", "addr": "0000:9b:00.0", "down": "0000:98:01.0"}
ND4_SWITCH_GROUP = NDV4_GROUPS[3]  # mlx5_ib4/5 (0105, 0106) with GPUs 000b and 000c

FAULTS: dict[str, Fault] = {
    # healthy controls with the loaded profile (NCCL's run judged where the image pins it)
    "shape-healthy-quick": Fault(
        (ND4, P5EN, MEGA),
        _noop,
        {},
        source=f"{NDV4}; {EC2_NET}; {GCP_NET}: a healthy host of the shape passes",
        profile="quick",
    ),
    # 1. the shape's GPU-NIC pairing
    "ndv4-hca-missing": Fault(
        (ND4,),
        drop_hca("mlx5_ib5"),
        {"fabric.ib.hcas": "DRAIN", "fabric.topology": "DRAIN"},
        source=f"{NDV4}: 7 of 8 HCAs; GPUs 000b and 000c have one of their two nearest",
        profile="quick",
    ),
    "ndv4-pairing-not-documented": Fault(
        (ND4,),
        _noop,
        {},
        source=(
            f"{NDV4}: with no pairing in the shape and no switch in the guest, which HCA is "
            "a GPU's is unknown: inconclusive (fabric.topology skips, naming "
            "nics.gpu_nic_pairs), never 'no nearest NIC' for every GPU"
        ),
        expect=_no_pairs(ND4),
    ),
    # 2. every NIC of the shape present
    "p5en-efa-device-missing": Fault(
        (P5EN,),
        drop_efa(P5EN_GPU2["efas"][1][0]),
        {"fabric.efa.devices": "DRAIN", "fabric.topology": "DRAIN"},
        source=f"{EC2_NET}: 15 of 16 EFA devices; GPU 2 has one of its two",
        profile="quick",
    ),
    "a3mega-gvnic-missing": Fault(
        (MEGA,),
        drop_netdev(MEGA_GPU4["nic"]),
        {"fabric.nics.count": "DRAIN", "fabric.topology": "DRAIN"},
        source=f"{GCP_NET}: 8 of 9 gVNICs; GPU 4 has no NIC",
    ),
    # 3. NCCL's rails
    "nccl-ib-hca-half-rails": Fault(
        (ND, ND4),
        ib_hca_env([f"mlx5_ib{i}" for i in range(4)]),
        {"fabric.nccl.rails": "BLOCK_IMAGE", "fabric.topology.nccl": "BLOCK_IMAGE"},
        source=f"{RAILS}: NCCL_IB_HCA=mlx5_ib0..3 baked into the image: 4 of 8 rails (and "
        "NCCL's topology has no NIC for the GPUs of the other four)",
        profile="quick",
    ),
    "nccl-ib-hca-env-only": Fault(
        (ND,),
        lambda s: s["fabric"]["nccl"]["env"].update(NCCL_IB_HCA="=mlx5_ib0,mlx5_ib1"),
        {"fabric.nccl.rails": "BLOCK_IMAGE"},
        source=f"{RAILS}: the probe ran with NCCL_IB_HCA naming 2 of the 8 HCAs (the setting "
        "alone is judged, whatever else the log says)",
        profile="quick",
    ),
    "nccl-ib-hca-excludes-none": Fault(
        (ND,),
        lambda s: s["fabric"]["nccl"]["env"].update(NCCL_IB_HCA="^mlx5_an0"),
        {},
        source=f"{RAILS}: NCCL_IB_HCA=^mlx5_an0 leaves out only the accelerated-networking "
        "VF, every InfiniBand rail stays: not a fault",
        profile="quick",
    ),
    "nccl-efa-iface-half-rails": Fault(
        (P5EN,),
        efa_iface_env(8),
        {"fabric.nccl.rails": "BLOCK_IMAGE", "fabric.topology.nccl": "BLOCK_IMAGE"},
        source=f"{RAILS}: FI_EFA_IFACE lists 8 of the 16 EFA devices: found 8 nics",
        profile="quick",
    ),
    # 4. NIC PCIe downgrade
    "nic-pcie-speed-downgraded": Fault(
        (ND,),
        link_set("0103:00:00.0", current_speed="16.0 GT/s PCIe"),
        {"fabric.nic.pcie": "DRAIN"},
        source=f"{PCIE}: mlx5_ib2 at 16 GT/s, capable of 32 GT/s",
    ),
    "nic-pcie-width-downgraded": Fault(
        (P5EN, MEGA),
        lambda s: link_set(
            P5EN_GPU2["efas"][0][1] if s["fabric"]["rdma"] else MEGA_GPU4["addr"],
            current_width="8",
        )(s),
        {"fabric.nic.pcie": "DRAIN"},
        source=f"{PCIE}: one NIC at x8 of x16",
    ),
    # 5. ACS between a GPU and its NIC
    "acs-redirect-gpu-nic": Fault(
        (P5EN, MEGA),
        lambda s: acs_set(
            f"{P5EN_GPU2['down'][:-4]}1.0" if s["fabric"]["rdma"] else MEGA_GPU4["down"], 0x001D
        )(s),
        {"fabric.acs": "DRAIN"},
        source=f"{ACS}: ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+ on the NIC's port",
    ),
    "acs-source-validation-only": Fault(
        (P5EN,),
        acs_set(f"{P5EN_GPU2['down'][:-4]}1.0", 0x0001),
        {},
        source=f"{ACS}: SrcValid+ alone redirects nothing",
    ),
    # 6. saturated IB error counters
    "ib-symbol-errors-saturated": Fault(
        (ND, ND4),
        ib_counter("mlx5_ib2", "symbol_error", 65535, 65535),
        {"fabric.ib.counters": "DRAIN"},
        source=f"{SATURATED}: symbol_error at 65535 in both reads",
    ),
    "ib-link-downed-saturated": Fault(
        (ND,),
        ib_counter("mlx5_ib6", "link_downed", 255, 255),
        {"fabric.ib.counters": "DRAIN"},
        source=f"{SATURATED}: link_downed at 255 in both reads",
    ),
    "ib-local-integrity-saturated": Fault(
        (ND4,),
        ib_counter("mlx5_ib1", "local_link_integrity_errors", 15, 15),
        {"fabric.ib.counters": "DRAIN"},
        source=f"{SATURATED}: LocalLinkIntegrityErrors is 4 bits: 15 in both reads",
    ),
    "ib-buffer-overruns-above-width": Fault(
        (ND,),
        ib_counter("mlx5_ib4", "excessive_buffer_overrun_errors", 80, 80),
        {},
        expect_warn=("fabric.ib.counters",),
        source=f"{SATURATED}: 80 cannot come from the 4-bit counter (the driver read a wider "
        "one): not saturated; under NVIDIA UFM's 100 and not rising, a warning",
    ),
    "ib-port-down-nccl-still-lists": Fault(
        (ND,),
        port_down("mlx5_ib3"),
        {"fabric.ib.ports": "DRAIN"},
        source="Linux sysfs-class-infiniband (state 1: DOWN): the port is the host's; NCCL's "
        "log and topology from before it went down still list it, which is not the image's "
        "fault (rails and topology judge the healthy NICs and those NCCL lists)",
        profile="quick",
    ),
    # 7. EFA error counters
    "efa-retrans-timeouts-rising": Fault(
        (P5, P5EN),
        lambda s: efa_hw(s["fabric"]["rdma"][5]["name"], retrans_timeout_events=(3, 7))(s),
        {"fabric.efa.counters": "DRAIN"},
        source=f"{EFA_HW}: retrans_timeout_events 3 -> 7 in 2 s on an idle host",
    ),
    "efa-impaired-remote-rising": Fault(
        (P5EN,),
        lambda s: efa_hw(
            s["fabric"]["rdma"][0]["name"],
            impaired_remote_conn_events=(0, 2),
            rdma_read_wr_err=(1, 4),
        )(s),
        {"fabric.efa.counters": "DRAIN"},
        source=f"{EFA_HW}: impaired_remote_conn_events 0 -> 2, rdma_read_wr_err 1 -> 4",
    ),
    "efa-retransmits-rising": Fault(
        (P5,),
        lambda s: efa_hw(
            s["fabric"]["rdma"][3]["name"],
            retrans_pkts=(120, 161),
            retrans_bytes=(983040, 1318912),
        )(s),
        {"fabric.efa.counters": "DRAIN"},
        source=f"{EFA_HW}: 41 packets retransmitted in 2 s while nothing used the EFA",
    ),
    "efa-counts-settled": Fault(
        (P5, P5EN),
        lambda s: efa_hw(
            s["fabric"]["rdma"][3]["name"],
            retrans_pkts=(120, 120),
            retrans_timeout_events=(2, 2),
            rdma_read_wr_err=(1, 1),
        )(s),
        {},
        source=f"{EFA_HW}: retransmits, two timeouts and a read error long ago, none while "
        "watched: history, not a fault",
    ),
    "efa-rx-drops-rising": Fault(
        (P5EN,),
        lambda s: efa_hw(s["fabric"]["rdma"][7]["name"], rx_drops=(10, 14))(s),
        {},
        expect_warn=("fabric.efa.counters",),
        source=f"{EFA_HW}: rx_drops (local receive path) rising: a warning",
    ),
    # 8. spare rows
    "row-remap-bank-no-spare": Fault(
        (H100, A100),
        gpu_set("nvmlDeviceGetRowRemapperHistogram", histogram(none=1, low=2), gpu=2),
        {"gpu.row_remap.spare": "DRAIN"},
        source=f"{SPARE}: one bank with none left on GPU 2",
    ),
    "row-remap-bank-low": Fault(
        (H100,),
        gpu_set("nvmlDeviceGetRowRemapperHistogram", histogram(low=1, partial=3), gpu=5),
        {},
        expect_warn=("gpu.row_remap.spare",),
        source=f"{SPARE}: one bank low on spares (warn), none exhausted",
    ),
    "row-remap-banks-partial": Fault(
        (H100,),
        gpu_set("nvmlDeviceGetRowRemapperHistogram", histogram(partial=4, high=9), gpu=1),
        {},
        source=f"{SPARE}: banks with spare rows used but left: not a fault",
    ),
}

__all__ = ["FAULTS"]
