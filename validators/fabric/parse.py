"""Reading the recorded sources: sysfs port strings, ``fi_info`` output, NCCL's
``NCCL_DEBUG=INFO`` lines and its topology dump. The same code reads a live host's capture
and a snapshot's."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from imagectl.validators.fabric.model import FabricSection, NetDev, RdmaDevice

_STATE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")
_RATE = re.compile(r"^\s*([\d.]+)\s*Gb/sec\s*\((\d+X)\s+(\w+)\)")


def sysfs_state(text: str | None) -> tuple[int | None, str]:
    """'4: ACTIVE' -> (4, 'ACTIVE'); unreadable -> (None, what was there)."""
    m = _STATE.match(text or "")
    return (int(m[1]), m[2]) if m else (None, (text or "unreadable").strip())


@dataclass(frozen=True)
class Rate:
    gbps: float
    width: str
    speed: str


def port_rate(text: str | None) -> Rate | None:
    """'400 Gb/sec (4X NDR)' -> Rate(400, '4X', 'NDR')."""
    m = _RATE.match(text or "")
    return Rate(float(m[1]), m[2], m[3]) if m else None


def is_efa(dev: RdmaDevice) -> bool:
    return dev.driver == "efa"


def is_ib(dev: RdmaDevice) -> bool:
    """An InfiniBand HCA: a port whose link layer is InfiniBand (not an Ethernet VF)."""
    return dev.driver != "efa" and any(p.link_layer == "InfiniBand" for p in dev.ports)


def is_roce(dev: RdmaDevice) -> bool:
    """An RDMA NIC on Ethernet (RoCE: GCP's ConnectX-7 MRDMA functions); Azure's
    accelerated-networking VF is one too, but no Azure shape has a RoCE fabric."""
    return dev.driver != "efa" and any(p.link_layer == "Ethernet" for p in dev.ports)


def roce_devices(section: FabricSection) -> list[RdmaDevice]:
    return [d for d in section.rdma if is_roce(d)]


def gvnic_devices(section: FabricSection) -> list[NetDev]:
    """gVNIC interfaces (driver gve), the primary NIC included."""
    return [n for n in section.netdevs or [] if n.driver == "gve"]


def fabric_devices(section: FabricSection, fabric: str) -> dict[str, str | None]:
    """Device name -> PCI function of the host's NICs of ``fabric``."""
    if fabric == "gvnic":
        return {n.name: n.pci for n in gvnic_devices(section)}
    pick = {"efa": efa_devices, "infiniband": ib_devices, "roce": roce_devices}.get(fabric)
    return {d.name: d.pci for d in pick(section)} if pick is not None else {}


def efa_devices(section: FabricSection) -> list[RdmaDevice]:
    return [d for d in section.rdma if is_efa(d)]


def ib_devices(section: FabricSection) -> list[RdmaDevice]:
    return [d for d in section.rdma if is_ib(d)]


def fi_info_entries(stdout: str) -> list[dict[str, str]]:
    """``fi_info -p efa``'s blocks ('provider: efa' then indented 'key: value' lines)."""
    entries: list[dict[str, str]] = []
    for line in stdout.splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        if key == "provider":
            entries.append({"provider": value.strip()})
        elif entries:
            entries[-1][key.strip()] = value.strip()
    return entries


def fi_info_efa_domains(stdout: str) -> list[str]:
    """The EFA devices fi_info lists: each device's domains ('rdmap16s27-rdm', '-dgrm')
    named once, without the endpoint suffix."""
    out: list[str] = []
    for e in fi_info_entries(stdout):
        if e.get("provider", "").split(";")[0] != "efa" or "domain" not in e:
            continue
        name = re.sub(r"-(rdm|dgrm)$", "", e["domain"])
        if name not in out:
            out.append(name)
    return out


def libfabric_version(stdout: str) -> str | None:
    """``fi_info --version``: 'libfabric: 1.22.0amzn4.0' -> '1.22.0amzn4.0'."""
    m = re.search(r"^libfabric:\s*(\S+)", stdout, re.M)
    return m[1] if m else None


@dataclass
class NcclNet:
    """What NCCL_DEBUG=INFO says about the network NCCL chose."""

    network: str | None = None
    nccl_version: str | None = None
    ofi_plugin: str | None = None  # aws-ofi-nccl's version
    ofi_libfabric: str | None = None
    ofi_provider: str | None = None
    ofi_nics: int | None = None
    ib_devices: list[str] = field(default_factory=list)
    plugin_problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_NCCL_LINES = {
    "network": re.compile(r"NCCL INFO Using network (.+?)\s*$"),
    "nccl_version": re.compile(r"NCCL version (\S+)"),
    "ofi_plugin": re.compile(r"NET/OFI Initializing aws-ofi-nccl (\S+)"),
    "ofi_libfabric": re.compile(r"NET/OFI Using Libfabric version (\S+)"),
}
_OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is (\w+).*?\(found (\d+) nics\)")
# NCCL's IB transport, and Google's gIB plugin built on it: 'NET/IB : Using [0]mlx5_0:1/RoCE ...'
_IB_USING = re.compile(r"NET/g?IB ?: Using (\[\d+\].*?)(?:; OOB|$)")
_PLUGIN_PROBLEM = re.compile(
    r"NET/Plugin ?: ?(No plugin found.*|Could not find.*|Failed to load.*|Plugin load returned.*)"
)


def nccl_net(log: str) -> NcclNet:
    out = NcclNet()
    for line in log.splitlines():
        for name, rx in _NCCL_LINES.items():
            m = rx.search(line)
            if m and getattr(out, name) is None:
                setattr(out, name, m[1])
        if m := _OFI_PROVIDER.search(line):
            out.ofi_provider, out.ofi_nics = m[1], int(m[2])
        if m := _IB_USING.search(line):
            out.ib_devices = re.findall(r"\[\d+\]([\w.-]+):\d+", m[1])
        if m := _PLUGIN_PROBLEM.search(line):
            out.plugin_problems.append(m[1].strip())
        if "NCCL WARN" in line:
            out.warnings.append(line.split("NCCL WARN", 1)[1].strip())
    return out


_SETTING = re.compile(r"\b([A-Z][A-Z0-9_]+) set (?:by environment )?to (\S+?)\.?\s*$")


def nccl_settings(log: str) -> dict[str, str]:
    """The settings NCCL_DEBUG=INFO says it read ('NCCL_IB_HCA set by environment to
    mlx5_ib0,...' from the environment or /etc/nccl.conf; 'NCCL_IB_HCA set to ...')."""
    out: dict[str, str] = {}
    for line in log.splitlines():
        if m := _SETTING.search(line):
            out.setdefault(m[1], m[2])
    return out


def pci_address(bus_id: str) -> str:
    """NVML's '00000000:18:00.0' or sysfs's '0000:18:00.0' -> '0000:18:00.0' (lower case)."""
    domain, _, rest = bus_id.strip().lower().rpartition(":")
    domain, _, bus = domain.rpartition(":")
    return f"{int(domain or '0', 16):04x}:{bus}:{rest}"


@dataclass
class NcclTopology:
    """NCCL's topology dump: each GPU's PCI address, the nets (NICs) behind the same PCIe
    switch in NCCL's tree, and each net's GPUDirect RDMA flag (``gdr``)."""

    nearest: dict[str, list[str]] = field(default_factory=dict)
    gdr: dict[str, bool] = field(default_factory=dict)
    error: str | None = None


def nccl_topology(xml_text: str) -> NcclTopology:
    if "<!DOCTYPE" in xml_text or "<!ENTITY" in xml_text:
        return NcclTopology(error="a topology dump with a DTD is not NCCL's")
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        return NcclTopology(error=f"not XML: {exc}")
    gpus: dict[str, list[ET.Element]] = {}  # GPU address -> its ancestors, nearest first
    nets: dict[str, list[ET.Element]] = {}
    gdr: dict[str, bool] = {}

    def walk(node: ET.Element, chain: list[ET.Element]) -> None:
        for child in node:
            if child.tag == "gpu" and node.tag == "pci":
                gpus[pci_address(node.get("busid", ""))] = chain  # its pci node first
            if child.tag == "net":
                name = child.get("name", "?")
                nets[name] = chain
                gdr[name] = child.get("gdr") == "1"
            walk(child, [child, *chain] if child.tag in ("pci", "cpu", "nic") else chain)

    walk(root, [])
    out = NcclTopology(gdr=gdr)
    for gpu, up in gpus.items():
        # the nets behind the GPU's own PCIe switch (PIX/PXB); none there: none nearest
        switch = up[1] if len(up) > 1 and up[1].tag == "pci" else None
        out.nearest[gpu] = sorted(
            n for n, chain in nets.items() if switch is not None and any(a is switch for a in chain)
        )
    return out
