"""Fault classes of the GPU fabric on one host (EFA on p5.48xlarge,
InfiniBand on ND H100 v5). Each verdict was written from the document before the validator
was asked:

1. A missing EFA device: AWS documents 32 EFA network cards on p5.48xlarge; fewer is a host
   that lost cards (DRAIN; the image is not at fault), and the GPU behind the same PCIe
   switch loses one of its four nearest NICs. No EFA device at all: fi_info -p efa lists
   no provider and NCCL can only use sockets, still the host's fault (DRAIN).
2. NCCL falling back to sockets: NCCL prints 'Using network Socket' (src/init.cc) when no
   net plugin and no IB device can be used although the fabric's NICs are there: the
   image's plugin or verbs stack is broken (BLOCK_IMAGE). aws-ofi-nccl other than the
   stack's pin is the image's fault too.
3. An IB port down or at reduced width: sysfs state/phys_state other than ACTIVE/LinkUp, or a
   rate other than the shape's 400 Gb/sec (4X NDR): the link, not the image (DRAIN).
4. Rising symbol errors: ibqueryerrors reports any count over zero; a counter that rises on
   an idle link while the capture watches is a link erring now (DRAIN, imagectl policy);
   counts that do not rise warn; NVIDIA UFM's default thresholds (excessive buffer
   overruns 100) fail.
5. nvidia-peermem not loaded: the image promises it (the stack's peermem: true, loaded at
   boot by modules-load.d): BLOCK_IMAGE; with NCCL also reporting gdr=0 on every HCA,
   GPUDirect RDMA is off too. A stack that does not ask for peermem passes.
Healthy controls: each base replayed with the loaded profile (the NCCL run judged).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from niclib import (
    LIBFABRIC,
    TOPO_FILE,
    efa_layout,
    efa_topo_xml,
    fi_info_efa,
    ib_topo_xml,
    nccl_efa_log,
    nccl_ib_log,
)
from snaplib import BASES, Fault, Snap, both

P5, ND = "h100-p5-efa", "h100-ndv5-ib"
EFA_DOC = (
    "AWS EC2 User Guide, accelerated computing network specifications (p5.48xlarge: 32 EFA "
    "network cards); AWS 'Get started with EFA and NCCL' (fi_info -p efa lists the efa "
    "provider)"
)
NCCL_NET = (
    "NVIDIA NCCL src/init.cc INFO 'Using network %s' ('Socket' is NCCL's TCP transport); "
    "NCCL_DEBUG=INFO 'NET/Plugin: Could not find: libnccl-net.so' and 'NET/IB : No device "
    "found.' before the fallback"
)
IB_SYSFS = (
    "Linux Documentation/ABI/stable/sysfs-class-infiniband (ports/N/state 4: ACTIVE, "
    "phys_state 5: LinkUp, rate '400 Gb/sec (4X NDR)'); Azure ND H100 v5 series: 8 x 400 "
    "Gb/s NDR InfiniBand"
)
COUNTERS = (
    "rdma-core ibqueryerrors(8): default threshold 0 (any error counted is reported); "
    "imagectl policy: a counter rising on an idle link during the capture drains the host"
)
PEERMEM = (
    "NVIDIA GPUDirect RDMA documentation: nvidia-peermem must be loaded for the HCA to reach "
    "GPU memory through the peer-memory API; the stack's network.infiniband.peermem"
)


def _fabric(s: Snap) -> dict[str, Any]:
    fab: dict[str, Any] = s["fabric"]
    return fab


def _port(s: Snap, hca: str) -> dict[str, Any]:
    dev = next(d for d in _fabric(s)["rdma"] if d["name"] == hca)
    port: dict[str, Any] = dev["ports"][0]
    return port


def drop_efa(names: set[str] | None) -> Callable[[Snap], None]:
    """EFA devices gone from the host (None: all of them): sysfs, fi_info, NCCL's view."""

    def apply(s: Snap) -> None:
        fab = _fabric(s)
        gone = {d["name"] for d in fab["rdma"]} if names is None else names
        addrs = {d["pci"] for d in fab["rdma"] if d["name"] in gone}
        fab["rdma"] = [d for d in fab["rdma"] if d["name"] not in gone]
        fab["pci"] = [f for f in fab["pci"] if f["address"] not in addrs]
        left = [d["name"] for d in fab["rdma"]]
        if left:
            fab["fi_info"]["stdout"] = fi_info_efa(left)
            fab["nccl"]["run"]["stdout"] = nccl_efa_log(len(left))
        else:
            fab["fi_info"].update(
                exit_code=61, stdout="", stderr_tail="fi_getinfo: -61 (No data available)\n"
            )
            fab["nccl"]["run"]["stdout"] = socket_log("p5-node", "enp71s0", ofi_failed=True)
        xml = fab["nccl"]["topo_xml"]
        for name in gone:
            xml = re.sub(rf"<nic><net name=\"{name}\"[^>]*/></nic>", "", xml)
        fab["nccl"]["topo_xml"] = xml

    return apply


def socket_log(host: str, iface: str, ofi_failed: bool = False) -> str:
    p = f"{host}:4242:4260 [0] NCCL INFO"
    plugin = (
        f"{p} NET/OFI Initializing aws-ofi-nccl 1.16.3\n"
        f"{host}:4242:4260 [0] NCCL WARN NET/OFI No NICs found for provider efa\n"
        if ofi_failed
        else f"{p} NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.\n"
    )
    return (
        f"NCCL version 2.26.2+cuda12.8\n{plugin}"
        f"{p} NET/IB : No device found.\n"
        f"{p} NET/Socket : Using [0]{iface}:10.1.2.3<0>\n"
        f"{p} Using network Socket\n"
        "imagectl-probe: ncclCommInitAll 0 8\n"
    )


def nccl_stdout(text: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        _fabric(s)["nccl"]["run"]["stdout"] = text

    return apply


def socket_topo(iface: str) -> Callable[[Snap], None]:
    """NCCL's dump when it runs on sockets: the one Ethernet net, no fabric NIC."""

    def apply(s: Snap) -> None:
        xml = re.sub(r"<nic><net [^>]*/></nic>", "", _fabric(s)["nccl"]["topo_xml"])
        xml = xml.replace(
            "</cpu>",
            f'<nic><net name="{iface}" dev="0" speed="100000" port="0" gdr="0"/></nic></cpu>',
            1,
        )
        _fabric(s)["nccl"]["topo_xml"] = xml

    return apply


def port_set(hca: str, **files: str) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        _port(s, hca).update(files)

    return apply


def ib_not_in_nccl(hca: str) -> Callable[[Snap], None]:
    """NCCL leaves a port that is not ACTIVE out (no net in its dump, not in NET/IB : Using)."""

    def apply(s: Snap) -> None:
        fab = _fabric(s)
        xml = re.sub(rf"<nic><net name=\"{hca}\"[^>]*/></nic>", "", fab["nccl"]["topo_xml"])
        fab["nccl"]["topo_xml"] = xml
        hcas = [f"mlx5_ib{i}" for i in range(8) if f"mlx5_ib{i}" != hca]
        fab["nccl"]["run"]["stdout"] = nccl_ib_log(hcas)

    return apply


def counter(hca: str, name: str, first: int, after: int) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        port = _port(s, hca)
        port["counters"][name] = first
        port["counters_after"][name] = after

    return apply


def module(name: str, loaded: bool) -> Callable[[Snap], None]:
    def apply(s: Snap) -> None:
        _fabric(s)["modules"][name] = loaded

    return apply


def ib_gdr_off(s: Snap) -> None:
    hcas = {f"01{i:02x}:00:00.0": f"mlx5_ib{i - 1}" for i in range(1, 9)}
    _fabric(s)["nccl"]["topo_xml"] = ib_topo_xml(hcas, gdr=0)


def efa_nccl_topo_file(s: Snap) -> None:
    """NCCL told to use another platform's topology file: its dump pairs each GPU with the
    NICs of the next GPU's switch."""
    layout = efa_layout(BASES[P5]["buses"])
    rotated = [{**g, "efas": layout[(i + 1) % len(layout)]["efas"]} for i, g in enumerate(layout)]
    fab = _fabric(s)
    fab["nccl"]["topo_xml"] = efa_topo_xml(rotated)
    fab["nccl"]["env"] = {
        "NCCL_TOPO_FILE": "/opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml"
    }


def _noop(s: Snap) -> None:
    del s


FAULTS: dict[str, Fault] = {
    # healthy controls, judged with the loaded profile (the NCCL run too)
    "fabric-healthy-quick": Fault(
        (P5, ND),
        _noop,
        {},
        source=f"{EFA_DOC}; {IB_SYSFS}; {NCCL_NET}: a healthy host of the shape passes",
        profile="quick",
    ),
    # 1. a missing EFA device
    "efa-device-missing": Fault(
        (P5,),
        drop_efa({"rdmap60s0"}),  # one of GPU 2's four (bus 0x3a: rdmap59s0..rdmap62s0)
        {"fabric.efa.devices": "DRAIN", "fabric.topology": "DRAIN"},
        source=f"{EFA_DOC}: 31 of 32 EFA devices; the GPU behind that switch has 3 of its 4",
        profile="quick",
    ),
    "efa-no-device-at-all": Fault(
        (P5,),
        drop_efa(None),
        {
            "fabric.efa.provider": "DRAIN",
            "fabric.efa.devices": "DRAIN",
            "fabric.topology": "DRAIN",
            "fabric.nccl.net": "DRAIN",
        },
        source=(
            f"{EFA_DOC}: no EFA network card attached (fi_getinfo -61 No data available); "
            "NCCL falls back to sockets because the host has no EFA, not the image"
        ),
        profile="quick",
    ),
    # 2. the NCCL net plugin falling back to sockets
    "nccl-net-socket-fallback-efa": Fault(
        (P5,),
        both(nccl_stdout(socket_log("p5-node", "enp71s0")), socket_topo("enp71s0")),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=(
            f"{NCCL_NET}; aws-ofi-nccl README (the plugin is found as libnccl-net.so or "
            "NCCL_NET_PLUGIN): 32 EFA devices present but NCCL uses Socket"
        ),
        profile="quick",
    ),
    "nccl-net-socket-fallback-ib": Fault(
        (ND,),
        both(nccl_stdout(nccl_ib_log([], network="Socket")), socket_topo("eth0")),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=f"{NCCL_NET}: 8 HCAs ACTIVE, yet 'NET/IB : No device found.' (verbs stack)",
        profile="quick",
    ),
    "nccl-ofi-plugin-not-the-pin": Fault(
        (P5,),
        nccl_stdout(nccl_efa_log(32, plugin="1.13.2-aws")),
        {"fabric.nccl.net": "BLOCK_IMAGE"},
        source=(
            "aws/aws-ofi-nccl: 'NET/OFI Initializing aws-ofi-nccl <version>'; the stack pins "
            "network.efa.ofi_nccl 1.16.3: an older plugin found first"
        ),
        profile="quick",
    ),
    # 3. an IB port down or at reduced width
    "ib-port-down": Fault(
        (ND,),
        both(
            port_set(
                "mlx5_ib3", state="1: DOWN", phys_state="3: Disabled", rate="10 Gb/sec (4X SDR)"
            ),
            ib_not_in_nccl("mlx5_ib3"),
        ),
        {"fabric.ib.ports": "DRAIN"},
        source=f"{IB_SYSFS}: mlx5_ib3 DOWN / Disabled",
        profile="quick",
    ),
    "ib-port-reduced-width": Fault(
        (ND,),
        port_set("mlx5_ib5", rate="200 Gb/sec (2X NDR)"),
        {"fabric.ib.ports": "DRAIN"},
        source=f"{IB_SYSFS}: mlx5_ib5 trained at 2X (200 Gb/s), the shape's is 4X NDR",
        profile="quick",
    ),
    "ib-port-init-no-subnet-manager": Fault(
        (ND,),
        both(port_set("mlx5_ib0", state="2: INIT"), ib_not_in_nccl("mlx5_ib0")),
        {"fabric.ib.ports": "DRAIN"},
        source=f"{IB_SYSFS}: LinkUp but INIT: the subnet manager has not activated the port",
        profile="quick",
    ),
    # 4. rising symbol errors (and the counters' other rules)
    "ib-symbol-errors-rising": Fault(
        (ND,),
        counter("mlx5_ib2", "symbol_error", 1200, 1450),
        {"fabric.ib.counters": "DRAIN"},
        source=f"{COUNTERS}: symbol_error 1200 -> 1450 in 2 s",
    ),
    "ib-link-downed-rising": Fault(
        (ND,),
        both(
            counter("mlx5_ib6", "link_downed", 3, 4),
            counter("mlx5_ib6", "link_error_recovery", 10, 12),
        ),
        {"fabric.ib.counters": "DRAIN"},
        source=f"{COUNTERS}: link_downed 3 -> 4, link_error_recovery 10 -> 12 in 2 s",
    ),
    "ib-symbol-errors-settled": Fault(
        (ND,),
        counter("mlx5_ib1", "symbol_error", 12, 12),
        {},
        expect_warn=("fabric.ib.counters",),
        source=f"{COUNTERS}: 12 symbol errors since the counters were cleared, none while watched",
    ),
    "ib-buffer-overruns-over-ufm": Fault(
        (ND,),
        counter("mlx5_ib4", "excessive_buffer_overrun_errors", 150, 150),
        {"fabric.ib.counters": "DRAIN"},
        source=(
            "NVIDIA UFM Supported Traps and Events, 120 Excessive Buffer Overrun Errors: "
            "default threshold 100; 150 counted"
        ),
    ),
    # 5. nvidia-peermem not loaded
    "ib-peermem-not-loaded": Fault(
        (ND,),
        module("nvidia_peermem", False),
        {"fabric.ib.peermem": "BLOCK_IMAGE"},
        source=f"{PEERMEM}: not loaded (NCCL still reports gdr=1 through DMA-BUF)",
        profile="quick",
    ),
    "ib-peermem-not-loaded-gdr-off": Fault(
        (ND,),
        both(module("nvidia_peermem", False), ib_gdr_off),
        {"fabric.ib.peermem": "BLOCK_IMAGE", "fabric.gdr": "BLOCK_IMAGE"},
        source=f"{PEERMEM}; NCCL's topology dump: gdr=0 on every HCA",
        profile="quick",
    ),
    "ib-peermem-not-pinned": Fault(
        (ND,),
        module("nvidia_peermem", False),
        {},
        source="the stack's network.infiniband.peermem false: peermem not expected",
        profile="quick",
        expect={"network": {"infiniband": {"doca_ofed": "3.1.0", "peermem": False}}},
    ),
    # the GPU-NIC topology as NCCL sees it
    "efa-nccl-topology-file-mismatch": Fault(
        (P5,),
        efa_nccl_topo_file,
        {"fabric.topology.nccl": "BLOCK_IMAGE"},
        source=(
            "NVIDIA NCCL NCCL_TOPO_FILE: a topology file that does not describe this host "
            "pairs each GPU with another switch's NICs (aws-ofi-nccl sets one per platform)"
        ),
        profile="quick",
    ),
}

__all__ = ["FAULTS", "LIBFABRIC", "TOPO_FILE"]
