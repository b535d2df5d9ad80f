"""The fabric section of the NIC-carrying healthy bases (snaplib.BASES entries with a
``fabric`` key): what ``imagectl snapshot`` records on a healthy p5.48xlarge (32 EFA devices,
four behind each GPU's PCIe switch) and a healthy ND H100 v5 (8 ConnectX-7 NDR HCAs, each
paired with one GPU as Azure/azhpc-images topology/ndv5-topo.xml documents, and the
accelerated-networking Ethernet VF beside them).

Each fabric also records what the shape-truth checks read: every network
interface (``netdevs``), each NIC's PCIe link (sysfs ``current_link_*`` / ``max_link_*``),
the ACS control bits of the bridges above GPUs and NICs, and each RDMA port's
``hw_counters`` read twice; and three more bases: ND A100 v4 (8 HDR HCAs in four groups of
two GPUs and two HCAs, every device in its own PCI domain, Azure/azhpc-images
topology/ndv4-topo.xml), p5en.48xlarge (16 EFA, two behind each GPU's switch) and
a3-megagpu-8g (8 gVNIC GPU NICs, one behind each GPU's switch, plus the primary gVNIC).

Values are written as the sources print them: sysfs port files ('4: ACTIVE', '5: LinkUp',
'400 Gb/sec (4X NDR)'), ``fi_info -p efa`` blocks, NCCL_DEBUG=INFO lines (formats from
NCCL src/init.cc and aws-ofi-nccl 1.16's log lines), NCCL's topology dump.
"""

from __future__ import annotations

from typing import Any

IB_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)
OFI_NCCL = "1.16.3"
LIBFABRIC = "2.1.0amzn3.0"
NCCL = "2.26.2+cuda12.8"


# EFA hw_counters (Linux drivers/infiniband/hw/efa: efa_com_basic_stats, messages, rdma read
# and write, network stats); mlx5 hw_counters (NVIDIA 'Understanding mlx5 Linux Counters')
EFA_HW = (
    "tx_bytes",
    "tx_pkts",
    "rx_bytes",
    "rx_pkts",
    "rx_drops",
    "send_bytes",
    "send_wrs",
    "recv_bytes",
    "recv_wrs",
    "rdma_read_wrs",
    "rdma_read_bytes",
    "rdma_read_wr_err",
    "rdma_read_resp_bytes",
    "rdma_write_wrs",
    "rdma_write_bytes",
    "rdma_write_wr_err",
    "rdma_write_recv_bytes",
    "retrans_bytes",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
    "lifespan",
)
MLX5_HW = (
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "req_cqe_error",
    "resp_cqe_error",
    "req_remote_access_errors",
    "resp_remote_access_errors",
)


# The kernel modules the fabric section records, loaded or not
MODULES = ("nvidia_peermem", "efa", "ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "nvidia")


def _modules(*loaded: str) -> dict[str, bool]:
    return {name: name in loaded for name in MODULES}


def _no_libfabric() -> dict[str, Any]:
    """What the fabric section records where libfabric is not installed (Azure, GCP)."""
    missing = "fi_info not found on PATH"
    return {
        "fi_info": {"argv": ["fi_info", "-p", "efa"], "error": missing},
        "fi_version": {"argv": ["fi_info", "--version"], "error": missing},
    }


def link(speed: str, width: int = 16) -> dict[str, Any]:
    """A PCIe link at its maximum, as sysfs prints it."""
    return {
        "current_speed": speed,
        "current_width": str(width),
        "max_speed": speed,
        "max_width": str(width),
    }


def _hw(names: tuple[str, ...]) -> dict[str, int]:
    return {n: (1 if n == "lifespan" else 0) for n in names}


def _port(rate: str, link_layer: str, counters: dict[str, int] | None) -> dict[str, Any]:
    port: dict[str, Any] = {
        "port": 1,
        "state": "4: ACTIVE",
        "phys_state": "5: LinkUp",
        "rate": rate,
        "link_layer": link_layer,
        "counters": dict(counters or {}),
    }
    if counters is not None:
        port["counters_after"] = dict(counters)
    return port


def _gpu_fn(address: str, upstream: list[str], numa: int) -> dict[str, Any]:
    return {
        "address": address,
        "pci_class": "0x030200",
        "vendor": "0x10de",
        "upstream": upstream,
        "numa_node": numa,
    }


# -- p5.48xlarge: EFA ---------------------------------------------------------------


def efa_layout(buses: list[str], per_gpu: int = 4) -> list[dict[str, Any]]:
    """Per GPU: its address, root port, switch, and its EFA devices (name, address)."""
    out = []
    for i, bus in enumerate(buses):
        b = int(bus, 16)
        efas = [(f"rdmap{b + 1 + k}s0", f"0000:{b + 1 + k:02x}:00.0") for k in range(per_gpu)]
        out.append(
            {
                "gpu": f"0000:{b:02x}:00.0",
                "root": f"0000:{b - 4:02x}:00.0",
                "switch": f"0000:{b - 3:02x}:00.0",
                "down": f"0000:{b - 2:02x}:00.0",
                "efas": efas,
                "numa": 0 if i < len(buses) // 2 else 1,
            }
        )
    return out


def fi_info_efa(names: list[str]) -> str:
    blocks = []
    for fabric in ("efa", "efa-direct"):
        for name in names:
            for ep, kind in (("rdm", "FI_EP_RDM"), ("dgrm", "FI_EP_DGRAM")):
                if fabric == "efa-direct" and ep == "dgrm":
                    continue
                blocks.append(
                    f"provider: efa\n    fabric: {fabric}\n    domain: {name}-{ep}\n"
                    f"    version: 201.0\n    type: {kind}\n    protocol: FI_PROTO_EFA\n"
                )
    return "".join(blocks)


def nccl_efa_log(nics: int, plugin: str = OFI_NCCL, settings: str = "") -> str:
    p = "p5-node:4242:4260 [0] NCCL INFO"
    return (
        settings + "p5-node:4242:4242 [0] NCCL INFO Bootstrap: Using enp71s0:10.1.2.3<0>\n"
        "p5-node:4242:4242 [0] NCCL INFO cudaDriverVersion 13000\n"
        f"NCCL version {NCCL}\n"
        f"{p} NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol.\n"
        f"{p} Successfully loaded external plugin libnccl-net.so\n"
        f"{p} NET/OFI Initializing aws-ofi-nccl {plugin}\n"
        f"{p} NET/OFI Using Libfabric version 2.1\n"
        f"{p} NET/OFI Using CUDA driver version 13000 with runtime 12080\n"
        f"{p} NET/OFI Selected provider is efa, fabric is efa-direct (found {nics} nics)\n"
        f"{p} NET/OFI Using transport protocol RDMA (platform set)\n"
        f"{p} Using network Libfabric\n"
        "imagectl-probe: ncclCommInitAll 0 8\n"
    )


def _net(name: str, dev: int, speed: int, gdr: int) -> str:
    return (
        f'<nic><net name="{name}" dev="{dev}" speed="{speed}" port="1" latency="0.000000" '
        f'guid="0x{dev + 1:x}" maxconn="131072" gdr="{gdr}"/></nic>'
    )


def efa_topo_xml(layout: list[dict[str, Any]], gdr: int = 1) -> str:
    lines = ['<system version="1">']
    dev = 0
    for numa in (0, 1):
        lines.append(f'  <cpu numaid="{numa}" arch="x86_64" vendor="AuthenticAMD">')
        for i, g in enumerate(x for x in layout if x["numa"] == numa):
            lines.append(f'    <pci busid="{g["switch"]}" class="0x060400" link_width="16">')
            lines.append(
                f'      <pci busid="{g["gpu"]}" class="0x030200" link_width="16">'
                f'<gpu dev="{4 * numa + i}" sm="90" rank="{4 * numa + i}" gdr="1"/></pci>'
            )
            for name, addr in g["efas"]:
                lines.append(
                    f'      <pci busid="{addr}" class="0x020000" link_width="16">'
                    f"{_net(name, dev, 100000, gdr)}</pci>"
                )
                dev += 1
            lines.append("    </pci>")
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


def efa_fabric(
    buses: list[str], per_gpu: int = 4, rate: str = "100 Gb/sec (4X EDR)"
) -> dict[str, Any]:
    layout = efa_layout(buses, per_gpu)
    rdma, pci = [], []
    acs: dict[str, int | None] = {}
    for g in layout:
        pci.append(_gpu_fn(g["gpu"], [g["root"], g["switch"], g["down"]], g["numa"]))
        acs.update({g["root"]: 0, g["switch"]: None, g["down"]: 0})
        for k, (name, addr) in enumerate(g["efas"]):
            down = f"{g['down'][:-4]}{k + 1:x}.0"
            acs[down] = 0
            port = _port(rate, "Unspecified", None)
            port["hw_counters"] = _hw(EFA_HW)
            port["hw_counters_after"] = _hw(EFA_HW)
            rdma.append(
                {
                    "name": name,
                    "driver": "efa",
                    "pci": addr,
                    "numa_node": g["numa"],
                    "ports": [port],
                }
            )
            pci.append(
                {
                    "address": addr,
                    "pci_class": "0x020000",
                    "vendor": "0x1d0f",
                    "upstream": [g["root"], g["switch"], down],
                    "numa_node": g["numa"],
                    "link": link("32.0 GT/s PCIe"),
                }
            )
    # the primary ENA interface (not a GPU NIC) on the first root port
    ena = {
        "name": "enp71s0",
        "driver": "ena",
        "pci": "0000:47:00.0",
        "operstate": "up",
        "speed_mbps": 200000,
        "mtu": 9001,
    }
    names = [d["name"] for d in rdma]
    return {
        "interval_s": 2.0,
        "rdma": rdma,
        "pci": pci,
        "modules": _modules("efa", "ib_core", "ib_uverbs", "nvidia"),
        "fi_info": {"argv": ["fi_info", "-p", "efa"], "exit_code": 0, "stdout": fi_info_efa(names)},
        "fi_version": {
            "argv": ["fi_info", "--version"],
            "exit_code": 0,
            "stdout": f"fi_info: {LIBFABRIC}\nlibfabric: {LIBFABRIC}\nlibfabric api: 2.1\n",
        },
        "nccl": {
            "run": {
                "argv": ["python3", "-c", "(probe)"],
                "exit_code": 0,
                "stdout": nccl_efa_log(len(names)),
            },
            "env": {},
            "topo_xml": efa_topo_xml(layout),
        },
        "netdevs": [ena],
        "acs": acs,
    }


# -- Standard_ND96isr_H100_v5: InfiniBand -------------------------------------------

# Azure/azhpc-images topology/ndv5-topo.xml: GPU -> HCA, both under one (virtual) switch
ND_PAIRS = (
    ("0001:00:00.0", "0101:00:00.0", "ffff:ff:01.0"),
    ("0002:00:00.0", "0102:00:00.0", "ffff:ff:02.0"),
    ("0003:00:00.0", "0103:00:00.0", "ffff:ff:03.0"),
    ("0008:00:00.0", "0104:00:00.0", "ffff:ff:04.0"),
    ("0009:00:00.0", "0105:00:00.0", "ffff:ff:05.0"),
    ("000a:00:00.0", "0106:00:00.0", "ffff:ff:06.0"),
    ("000b:00:00.0", "0107:00:00.0", "ffff:ff:07.0"),
    ("000c:00:00.0", "0108:00:00.0", "ffff:ff:08.0"),
)
TOPO_FILE = "/opt/microsoft/ndv5-topo.xml"


def nccl_ib_log(hcas: list[str], network: str = "IB", settings: str = "") -> str:
    p = "nd-node:4242:4260 [0] NCCL INFO"
    using = " ".join(f"[{i}]{h}:1/IB" for i, h in enumerate(hcas))
    net = (
        f"{p} NET/IB : Using {using} [RO]; OOB eth0:10.0.0.4<0>\n"
        if network == "IB"
        else f"{p} NET/IB : No device found.\n{p} NET/Socket : Using [0]eth0:10.0.0.4<0>\n"
    )
    return (
        f"nd-node:4242:4242 [0] NCCL INFO NCCL_TOPO_FILE set by environment to {TOPO_FILE}\n"
        + settings
        + f"NCCL version {NCCL}\n"
        f"{p} NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.\n"
        f"{net}{p} Using network {network}\n"
        "imagectl-probe: ncclCommInitAll 0 8\n"
    )


def ib_topo_xml(hcas: dict[str, str], gdr: int = 1) -> str:
    """NCCL's dump with NCCL_TOPO_FILE=ndv5-topo.xml: the file's tree with the GPUs and the
    nets NCCL found filled in (``hcas``: HCA address -> name)."""
    lines = ['<system version="1">']
    for numa in (0, 1):
        lines.append(f'  <cpu numaid="{numa}" arch="x86_64" vendor="GenuineIntel">')
        for i, (gpu, hca, sw) in enumerate(ND_PAIRS[4 * numa : 4 * numa + 4]):
            lines.append(f'    <pci busid="{sw}" class="0x060400" link_width="16">')
            lines.append(
                f'      <pci busid="{gpu}" class="0x030200" link_width="16">'
                f'<gpu dev="{4 * numa + i}" sm="90" rank="{4 * numa + i}" gdr="1"/></pci>'
            )
            net = _net(hcas[hca], 4 * numa + i, 400000, gdr) if hca in hcas else ""
            lines.append(f'      <pci busid="{hca}" class="0x020700" link_width="16">{net}</pci>')
            lines.append("    </pci>")
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


def _hca(i: int, hca: str, numa: int, rate: str) -> dict[str, Any]:
    port = _port(rate, "InfiniBand", dict.fromkeys(IB_COUNTERS, 0))
    port["hw_counters"] = _hw(MLX5_HW)
    port["hw_counters_after"] = _hw(MLX5_HW)
    return {
        "name": f"mlx5_ib{i}",
        "driver": "mlx5_core",
        "pci": hca,
        "numa_node": numa,
        "ports": [port],
    }


def _hca_fn(hca: str, numa: int, speed: str) -> dict[str, Any]:
    return {
        "address": hca,
        "pci_class": "0x020700",
        "vendor": "0x15b3",
        "upstream": [],
        "numa_node": numa,
        "link": link(speed),
    }


def _azure_netdevs(hcas: list[str]) -> list[dict[str, Any]]:
    """IPoIB interfaces on the HCAs and the accelerated-networking VF (eth0 itself is
    hv_netvsc on VMBus: no PCI function, so not listed)."""
    out = [
        {
            "name": f"ib{i}",
            "driver": "mlx5_core",
            "pci": h,
            "operstate": "up",
            "speed_mbps": None,
            "mtu": 2044,
        }
        for i, h in enumerate(hcas)
    ]
    out.append(
        {
            "name": "enP49076s1",
            "driver": "mlx5_core",
            "pci": "c2b4:00:02.0",
            "operstate": "up",
            "speed_mbps": 100000,
            "mtu": 1500,
        }
    )
    return out


def ib_fabric() -> dict[str, Any]:
    zero = dict.fromkeys(IB_COUNTERS, 0)
    rdma, pci = [], []
    for i, (gpu, hca, _sw) in enumerate(ND_PAIRS):
        numa = 0 if i < 4 else 1
        pci.append(_gpu_fn(gpu, [], numa))
        rdma.append(_hca(i, hca, numa, "400 Gb/sec (4X NDR)"))
        pci.append(_hca_fn(hca, numa, "32.0 GT/s PCIe"))
    rdma.append(  # accelerated networking: an Ethernet VF, not part of the GPU fabric
        {
            "name": "mlx5_an0",
            "driver": "mlx5_core",
            "pci": "c2b4:00:02.0",
            "numa_node": 0,
            "ports": [_port("100 Gb/sec (4X EDR)", "Ethernet", zero)],
        }
    )
    hcas = {hca: f"mlx5_ib{i}" for i, (_g, hca, _s) in enumerate(ND_PAIRS)}
    return _azure_ib_section(
        rdma, pci, nccl_ib_log(list(hcas.values())), TOPO_FILE, ib_topo_xml(hcas), list(hcas)
    )


def _azure_ib_section(
    rdma: list[dict[str, Any]],
    pci: list[dict[str, Any]],
    nccl_log: str,
    topo_file: str,
    topo_xml: str,
    hcas: list[str],
) -> dict[str, Any]:
    """An Azure InfiniBand host's fabric section: the HCAs' RDMA and PCI records, the
    modules loaded, no libfabric (fi_info is not installed), NCCL's run on the IB transport
    with the image's topology file, and no bridge above any GPU or HCA (each in its own
    PCI domain)."""
    return {
        "interval_s": 2.0,
        "rdma": rdma,
        "pci": pci,
        "modules": _modules(
            "nvidia_peermem", "ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "nvidia"
        ),
        **_no_libfabric(),
        "nccl": {
            "run": {"argv": ["python3", "-c", "(probe)"], "exit_code": 0, "stdout": nccl_log},
            "env": {"NCCL_TOPO_FILE": topo_file},
            "topo_xml": topo_xml,
        },
        "netdevs": _azure_netdevs(hcas),
        "acs": {},
    }


# -- Standard_ND96amsr_A100_v4: InfiniBand, two GPUs and two HCAs per virtual switch ------

# Azure/azhpc-images topology/ndv4-topo.xml (commit 4a4565a0): per NUMA node one virtual
# switch with (GPU, HCA, GPU, HCA)
NDV4_GROUPS = (
    (0, "ffff:ff:01.0", ("0003:00:00.0", "0004:00:00.0"), ("0103:00:00.0", "0104:00:00.0")),
    (1, "ffff:ff:02.0", ("0001:00:00.0", "0002:00:00.0"), ("0101:00:00.0", "0102:00:00.0")),
    (2, "ffff:ff:03.0", ("000d:00:00.0", "000e:00:00.0"), ("0107:00:00.0", "0108:00:00.0")),
    (3, "ffff:ff:04.0", ("000b:00:00.0", "000c:00:00.0"), ("0105:00:00.0", "0106:00:00.0")),
)
NDV4_GPUS = [g for _n, _s, gs, _h in NDV4_GROUPS for g in gs]
NDV4_HCAS = sorted(h for _n, _s, _g, hs in NDV4_GROUPS for h in hs)
NDV4_TOPO_FILE = "/opt/microsoft/ndv4-topo.xml"


def ndv4_hca_names() -> dict[str, str]:
    """HCA address -> name: mlx5_ib0..7 in address order (0101 -> mlx5_ib0)."""
    return {h: f"mlx5_ib{i}" for i, h in enumerate(NDV4_HCAS)}


def ndv4_topo_xml(hcas: dict[str, str], gdr: int = 1) -> str:
    lines = ['<system version="1">']
    dev = 0
    for numa, sw, gpus, groups in NDV4_GROUPS:
        lines.append(f'  <cpu numaid="{numa}" arch="x86_64" vendor="AuthenticAMD">')
        lines.append(f'    <pci busid="{sw}" class="0x060400" link_width="16">')
        for gpu, hca in zip(gpus, groups, strict=True):
            lines.append(
                f'      <pci busid="{gpu}" class="0x030200" link_width="16">'
                f'<gpu dev="{dev}" sm="80" rank="{dev}" gdr="1"/></pci>'
            )
            net = _net(hcas[hca], dev, 200000, gdr) if hca in hcas else ""
            lines.append(f'      <pci busid="{hca}" class="0x020700" link_width="16">{net}</pci>')
            dev += 1
        lines.append("    </pci>")
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


def nccl_ndv4_log(hcas: list[str], settings: str = "") -> str:
    return nccl_ib_log(hcas, settings=settings).replace(TOPO_FILE, NDV4_TOPO_FILE)


def ndv4_fabric() -> dict[str, Any]:
    zero = dict.fromkeys(IB_COUNTERS, 0)
    names = ndv4_hca_names()
    rdma, pci = [], []
    for numa, _sw, gpus, hcas in NDV4_GROUPS:
        for gpu in gpus:
            pci.append(_gpu_fn(gpu, [], numa))
        for hca in hcas:
            rdma.append(_hca(int(names[hca][-1]), hca, numa, "200 Gb/sec (4X HDR)"))
            pci.append(_hca_fn(hca, numa, "16.0 GT/s PCIe"))
    rdma.sort(key=lambda d: d["name"])
    rdma.append(
        {
            "name": "mlx5_an0",
            "driver": "mlx5_core",
            "pci": "c2b4:00:02.0",
            "numa_node": 0,
            "ports": [_port("100 Gb/sec (4X EDR)", "Ethernet", zero)],
        }
    )
    return _azure_ib_section(
        rdma,
        pci,
        nccl_ndv4_log(sorted(names.values())),
        NDV4_TOPO_FILE,
        ndv4_topo_xml(names),
        list(NDV4_HCAS),
    )


# -- a3-megagpu-8g: GPUDirect-TCPXO over 8 gVNIC GPU NICs ---------------------------------


def gvnic_layout(buses: list[str]) -> list[dict[str, Any]]:
    """Per GPU: its address, root port, switch, downstream ports and its gVNIC (eth1..8)."""
    out = []
    for i, bus in enumerate(buses):
        b = int(bus, 16)
        out.append(
            {
                "gpu": f"0000:{b:02x}:00.0",
                "root": f"0000:{b - 4:02x}:00.0",
                "switch": f"0000:{b - 3:02x}:00.0",
                "down": f"0000:{b - 2:02x}:00.0",
                "nic_down": f"0000:{b - 2:02x}:01.0",
                "nic": (f"eth{i + 1}", f"0000:{b + 1:02x}:00.0"),
                "numa": 0 if i < len(buses) // 2 else 1,
            }
        )
    return out


def gvnic_fabric(buses: list[str]) -> dict[str, Any]:
    pci, acs, netdevs = [], {}, []
    netdevs.append(
        {
            "name": "eth0",
            "driver": "gve",
            "pci": "0000:06:00.0",
            "operstate": "up",
            "speed_mbps": 200000,
            "mtu": 8244,
        }
    )
    for g in gvnic_layout(buses):
        pci.append(_gpu_fn(g["gpu"], [g["root"], g["switch"], g["down"]], g["numa"]))
        name, addr = g["nic"]
        pci.append(
            {
                "address": addr,
                "pci_class": "0x020000",
                "vendor": "0x1ae0",
                "upstream": [g["root"], g["switch"], g["nic_down"]],
                "numa_node": g["numa"],
                "link": link("16.0 GT/s PCIe"),
            }
        )
        acs.update({g["root"]: 0, g["switch"]: None, g["down"]: 0, g["nic_down"]: 0})
        netdevs.append(
            {
                "name": name,
                "driver": "gve",
                "pci": addr,
                "operstate": "up",
                "speed_mbps": 200000,
                "mtu": 8244,
            }
        )
    pci.append(
        {
            "address": "0000:06:00.0",
            "pci_class": "0x020000",
            "vendor": "0x1ae0",
            "upstream": ["0000:00:04.0"],
            "numa_node": 0,
            "link": link("16.0 GT/s PCIe"),
        }
    )
    gpu_nics = [g["nic"][0] for g in gvnic_layout(buses)]
    return {
        "interval_s": 2.0,
        "rdma": [],
        "pci": pci,
        "modules": _modules("nvidia"),
        **_no_libfabric(),
        "netdevs": netdevs,
        "acs": acs,
        "nccl": {
            "run": {
                "argv": ["python3", "-c", "(probe)"],
                "exit_code": 0,
                "stdout": nccl_fastrak_log(gpu_nics),
            },
            "env": fastrak_env(gpu_nics),
            "topo_xml": None,
        },
    }


# Google's GPUDirect-TCPXO NCCL setup (nccl-env-profile.sh): the control NIC, every GPU NIC
def fastrak_env(gpu_nics: list[str]) -> dict[str, str]:
    return {
        "NCCL_FASTRAK_CTRL_DEV": "eth0",
        "NCCL_FASTRAK_IFNAME": ",".join(gpu_nics),
        "NCCL_SOCKET_IFNAME": "eth0",
    }


def nccl_fastrak_log(gpu_nics: list[str], network: str = "FasTrak") -> str:
    """NCCL_DEBUG=INFO of a TCPXO host: the settings NCCL read, the FasTrak plugin loading
    (its version as a healthy A3 Mega run logs it), the network."""
    p = "a3mega-node:4242:4260 [0] NCCL INFO"
    env = fastrak_env(gpu_nics)
    loaded = (
        f"{p} NET/Plugin: Loaded net plugin FasTrak (v8)\n"
        f"{p} Initializing network FasTrak, version: 1.0.17\n"
        if network == "FasTrak"
        else f"{p} NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.\n"
        f"{p} NET/Socket : Using [0]eth0:10.128.0.12<0>\n"
    )
    return (
        f"{p} NCCL version {NCCL}\n"
        + "".join(f"{p} {k} set by environment to {v}.\n" for k, v in sorted(env.items()))
        + loaded
        + f"{p} Using network {network}\n"
        "imagectl-probe: ncclCommInitAll 0 8\n"
    )


# -- a3-highgpu-8g: GPUDirect-TCPX over 4 gVNIC GPU NICs, each shared by two GPUs ----------


def tcpx_fabric(buses: list[str]) -> dict[str, Any]:
    """Two GPUs and one gVNIC GPU NIC behind each of four PCIe switches, plus the primary."""
    pci, acs, netdevs = [], {}, []
    netdevs.append(
        {
            "name": "eth0",
            "driver": "gve",
            "pci": "0000:06:00.0",
            "operstate": "up",
            "speed_mbps": 200000,
            "mtu": 8244,
        }
    )
    pci.append(
        {
            "address": "0000:06:00.0",
            "pci_class": "0x020000",
            "vendor": "0x1ae0",
            "upstream": ["0000:00:04.0"],
            "numa_node": 0,
            "link": link("16.0 GT/s PCIe"),
        }
    )
    gpu_nics = []
    for k in range(len(buses) // 2):
        first = int(buses[2 * k], 16)
        root, switch = f"0000:{first - 4:02x}:00.0", f"0000:{first - 3:02x}:00.0"
        numa = 0 if k < len(buses) // 4 else 1
        for j in (0, 1):
            b = int(buses[2 * k + j], 16)
            down = f"0000:{first - 2:02x}:{j:02x}.0"
            pci.append(_gpu_fn(f"0000:{b:02x}:00.0", [root, switch, down], numa))
            acs[down] = 0
        nic_down = f"0000:{first - 2:02x}:02.0"
        name, addr = f"eth{k + 1}", f"0000:{first + 1:02x}:00.0"
        gpu_nics.append(name)
        acs.update({root: 0, switch: None, nic_down: 0})
        pci.append(
            {
                "address": addr,
                "pci_class": "0x020000",
                "vendor": "0x1ae0",
                "upstream": [root, switch, nic_down],
                "numa_node": numa,
                "link": link("16.0 GT/s PCIe"),
            }
        )
        netdevs.append(
            {
                "name": name,
                "driver": "gve",
                "pci": addr,
                "operstate": "up",
                "speed_mbps": 200000,
                "mtu": 8244,
            }
        )
    return {
        "interval_s": 2.0,
        "rdma": [],
        "pci": pci,
        "modules": _modules("nvidia"),
        **_no_libfabric(),
        "netdevs": netdevs,
        "acs": acs,
        "nccl": {
            "run": {
                "argv": ["python3", "-c", "(probe)"],
                "exit_code": 0,
                "stdout": nccl_tcpx_log(gpu_nics),
            },
            "env": tcpx_env(gpu_nics),
            "topo_xml": None,
        },
    }


# Google's GPUDirect-TCPX NCCL setup: the control NIC, every GPU NIC
def tcpx_env(gpu_nics: list[str]) -> dict[str, str]:
    return {
        "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": ",".join(gpu_nics),
        "NCCL_SOCKET_IFNAME": "eth0",
    }


def nccl_tcpx_log(gpu_nics: list[str], network: str = "GPUDirectTCPX_v7") -> str:
    p = "a3high-node:4242:4260 [0] NCCL INFO"
    env = tcpx_env(gpu_nics)
    return (
        f"{p} NCCL version {NCCL}\n"
        + "".join(f"{p} {k} set by environment to {v}.\n" for k, v in sorted(env.items()))
        + f"{p} NET/Plugin: Loaded net plugin GPUDirectTCPX_v7 (v7)\n"
        + f"{p} Using network {network}\n"
        "imagectl-probe: ncclCommInitAll 0 8\n"
    )


# -- a3-ultragpu-8g: GPUDirect RDMA over RoCE (8 ConnectX-7, gIB) ------------------------


def roce_layout(buses: list[str]) -> list[dict[str, Any]]:
    """Per GPU: its address, root port, switch, downstream ports and its CX-7 (mlx5_<i>)."""
    out = []
    for i, bus in enumerate(buses):
        b = int(bus, 16)
        out.append(
            {
                "gpu": f"0000:{b:02x}:00.0",
                "root": f"0000:{b - 4:02x}:00.0",
                "switch": f"0000:{b - 3:02x}:00.0",
                "down": f"0000:{b - 2:02x}:00.0",
                "nic_down": f"0000:{b - 2:02x}:01.0",
                "nic": (f"mlx5_{i}", f"0000:{b + 1:02x}:00.0", f"gpu{i}rdma0"),
                "numa": 0 if i < len(buses) // 2 else 1,
            }
        )
    return out


def nccl_gib_log(hcas: list[str], network: str = "gIB") -> str:
    """NCCL_DEBUG=INFO of an A3 Ultra host with Google's gIB plugin (the lines Google's
    'Collect and understand NCCL logs' page shows, and NCCL's IB device list)."""
    p = "a3ultra-node:4242:4260 [0] NCCL INFO"
    devs = " ".join(f"[{i}]{h}:1/RoCE" for i, h in enumerate(hcas))
    if network == "gIB":
        body = (
            f"{p} NET/gIB : Initializing gIB v1.0.5\n"
            f"{p} NET/gIB : Using {devs} [RO]; OOB eth0:10.128.0.12<0>\n"
        )
    else:
        body = (
            f"{p} NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
            f"{p} NET/IB : No device found.\n"
            f"{p} NET/Socket : Using [0]eth0:10.128.0.12<0>\n"
        )
    return (
        f"{p} NCCL version {NCCL}\n" + body + f"{p} Using network {network}\n"
        "imagectl-probe: ncclCommInitAll 0 8\n"
    )


def roce_topo_xml(layout: list[dict[str, Any]], gdr: int = 1) -> str:
    lines = ['<system version="1">']
    for numa in (0, 1):
        lines.append(f'  <cpu numaid="{numa}" arch="x86_64" vendor="GenuineIntel">')
        for i, g in enumerate(x for x in layout if x["numa"] == numa):
            name, addr, _ = g["nic"]
            dev = 4 * numa + i
            lines.append(f'    <pci busid="{g["switch"]}" class="0x060400" link_width="16">')
            lines.append(
                f'      <pci busid="{g["gpu"]}" class="0x030200" link_width="16">'
                f'<gpu dev="{dev}" sm="90" rank="{dev}" gdr="1"/></pci>'
            )
            lines.append(
                f'      <pci busid="{addr}" class="0x020000" link_width="16">'
                f"{_net(name, dev, 400000, gdr)}</pci>"
            )
            lines.append("    </pci>")
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


def roce_fabric(buses: list[str], rate: str = "400 Gb/sec (4X NDR)") -> dict[str, Any]:
    layout = roce_layout(buses)
    rdma, pci, netdevs = [], [], []
    acs: dict[str, int | None] = {}
    # the two gVNICs beside the RDMA NICs (not GPU NICs: Google's host_nics)
    for k, addr in enumerate(("0000:06:00.0", "0000:07:00.0")):
        netdevs.append(
            {
                "name": f"eth{k}",
                "driver": "gve",
                "pci": addr,
                "operstate": "up",
                "speed_mbps": 200000,
                "mtu": 8896,
            }
        )
        pci.append(
            {
                "address": addr,
                "pci_class": "0x020000",
                "vendor": "0x1ae0",
                "upstream": ["0000:00:04.0"],
                "numa_node": 0,
                "link": link("16.0 GT/s PCIe"),
            }
        )
    for g in layout:
        name, addr, ifname = g["nic"]
        pci.append(_gpu_fn(g["gpu"], [g["root"], g["switch"], g["down"]], g["numa"]))
        acs.update({g["root"]: 0, g["switch"]: None, g["down"]: 0, g["nic_down"]: 0})
        port = _port(rate, "Ethernet", None)
        port["hw_counters"] = _hw(MLX5_HW)
        port["hw_counters_after"] = _hw(MLX5_HW)
        rdma.append(
            {
                "name": name,
                "driver": "mlx5_core",
                "pci": addr,
                "numa_node": g["numa"],
                "ports": [port],
            }
        )
        pci.append(
            {
                "address": addr,
                "pci_class": "0x020000",
                "vendor": "0x15b3",
                "upstream": [g["root"], g["switch"], g["nic_down"]],
                "numa_node": g["numa"],
                "link": link("32.0 GT/s PCIe"),
            }
        )
        netdevs.append(
            {
                "name": ifname,
                "driver": "mlx5_core",
                "pci": addr,
                "operstate": "up",
                "speed_mbps": 400000,
                "mtu": 8896,
            }
        )
    hcas = [g["nic"][0] for g in layout]
    return {
        "interval_s": 2.0,
        "rdma": rdma,
        "pci": pci,
        "modules": _modules("ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "nvidia"),
        **_no_libfabric(),
        "nccl": {
            "run": {
                "argv": ["python3", "-c", "(probe)"],
                "exit_code": 0,
                "stdout": nccl_gib_log(hcas),
            },
            "env": {},
            "topo_xml": roce_topo_xml(layout),
        },
        "netdevs": netdevs,
        "acs": acs,
    }


def fabric_for(kind: str, buses: list[str]) -> dict[str, Any]:
    if kind == "efa":
        return efa_fabric(buses)
    if kind == "efa-p5en":
        return efa_fabric(buses, per_gpu=2, rate="200 Gb/sec (4X HDR)")
    if kind == "infiniband-ndv4":
        return ndv4_fabric()
    if kind == "gvnic":
        return gvnic_fabric(buses)
    if kind == "roce":
        return roce_fabric(buses)
    if kind == "tcpx":
        return tcpx_fabric(buses)
    return ib_fabric()
