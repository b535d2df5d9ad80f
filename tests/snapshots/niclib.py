"""The fabric section of the NIC-carrying healthy bases (snaplib.BASES entries with a
``fabric`` key): what ``imagectl snapshot`` records on a healthy p5.48xlarge (32 EFA devices,
four behind each GPU's PCIe switch) and a healthy ND H100 v5 (8 ConnectX-7 NDR HCAs, each
paired with one GPU as Azure/azhpc-images topology/ndv5-topo.xml documents, and the
accelerated-networking Ethernet VF beside them).

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


def efa_layout(buses: list[str]) -> list[dict[str, Any]]:
    """Per GPU: its address, root port, switch, and its 4 EFA devices (name, address)."""
    out = []
    for i, bus in enumerate(buses):
        b = int(bus, 16)
        efas = [(f"rdmap{b + 1 + k}s0", f"0000:{b + 1 + k:02x}:00.0") for k in range(4)]
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


def nccl_efa_log(nics: int, plugin: str = OFI_NCCL) -> str:
    p = "p5-node:4242:4260 [0] NCCL INFO"
    return (
        "p5-node:4242:4242 [0] NCCL INFO Bootstrap: Using enp71s0:10.1.2.3<0>\n"
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


def efa_fabric(buses: list[str]) -> dict[str, Any]:
    layout = efa_layout(buses)
    rdma, pci = [], []
    for g in layout:
        pci.append(_gpu_fn(g["gpu"], [g["root"], g["switch"], g["down"]], g["numa"]))
        for k, (name, addr) in enumerate(g["efas"]):
            down = f"{g['down'][:-4]}{k + 1:x}.0"
            rdma.append(
                {
                    "name": name,
                    "driver": "efa",
                    "pci": addr,
                    "numa_node": g["numa"],
                    "ports": [_port("100 Gb/sec (4X EDR)", "Unspecified", None)],
                }
            )
            pci.append(
                {
                    "address": addr,
                    "pci_class": "0x020000",
                    "vendor": "0x1d0f",
                    "upstream": [g["root"], g["switch"], down],
                    "numa_node": g["numa"],
                }
            )
    names = [d["name"] for d in rdma]
    return {
        "interval_s": 2.0,
        "rdma": rdma,
        "pci": pci,
        "modules": {
            "nvidia_peermem": False,
            "efa": True,
            "ib_core": True,
            "ib_uverbs": True,
            "mlx5_core": False,
            "mlx5_ib": False,
            "nvidia": True,
        },
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


def nccl_ib_log(hcas: list[str], network: str = "IB") -> str:
    p = "nd-node:4242:4260 [0] NCCL INFO"
    using = " ".join(f"[{i}]{h}:1/IB" for i, h in enumerate(hcas))
    net = (
        f"{p} NET/IB : Using {using} [RO]; OOB eth0:10.0.0.4<0>\n"
        if network == "IB"
        else f"{p} NET/IB : No device found.\n{p} NET/Socket : Using [0]eth0:10.0.0.4<0>\n"
    )
    return (
        f"nd-node:4242:4242 [0] NCCL INFO NCCL_TOPO_FILE set by environment to {TOPO_FILE}\n"
        f"NCCL version {NCCL}\n"
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


def ib_fabric() -> dict[str, Any]:
    zero = dict.fromkeys(IB_COUNTERS, 0)
    rdma, pci = [], []
    for i, (gpu, hca, _sw) in enumerate(ND_PAIRS):
        numa = 0 if i < 4 else 1
        pci.append(_gpu_fn(gpu, [], numa))
        rdma.append(
            {
                "name": f"mlx5_ib{i}",
                "driver": "mlx5_core",
                "pci": hca,
                "numa_node": numa,
                "ports": [_port("400 Gb/sec (4X NDR)", "InfiniBand", zero)],
            }
        )
        pci.append(
            {
                "address": hca,
                "pci_class": "0x020700",
                "vendor": "0x15b3",
                "upstream": [],
                "numa_node": numa,
            }
        )
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
    return {
        "interval_s": 2.0,
        "rdma": rdma,
        "pci": pci,
        "modules": {
            "nvidia_peermem": True,
            "efa": False,
            "ib_core": True,
            "ib_uverbs": True,
            "mlx5_core": True,
            "mlx5_ib": True,
            "nvidia": True,
        },
        "fi_info": {"argv": ["fi_info", "-p", "efa"], "error": "fi_info not found on PATH"},
        "fi_version": {"argv": ["fi_info", "--version"], "error": "fi_info not found on PATH"},
        "nccl": {
            "run": {
                "argv": ["python3", "-c", "(probe)"],
                "exit_code": 0,
                "stdout": nccl_ib_log(list(hcas.values())),
            },
            "env": {"NCCL_TOPO_FILE": TOPO_FILE},
            "topo_xml": ib_topo_xml(hcas),
        },
    }


def fabric_for(kind: str, buses: list[str]) -> dict[str, Any]:
    return efa_fabric(buses) if kind == "efa" else ib_fabric()
