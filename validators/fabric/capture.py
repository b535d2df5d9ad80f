"""Read the fabric on a live host (the snapshot's ``fabric`` section, and what the live
checks judge): /sys/class/infiniband, /sys/bus/pci, /sys/module, ``fi_info -p efa`` and,
when asked, a tiny NCCL run (``nccl_probe.py``)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from imagectl.validators.fabric.commands import run_command
from imagectl.validators.fabric.model import (
    FabricSection,
    NetDev,
    PcieLink,
    PciFunction,
    RdmaDevice,
    RdmaPort,
)
from imagectl.validators.fabric.nccl_probe import probe
from imagectl.validators.fabric.topology import GPU_CLASSES, NVIDIA

MODULES = ("nvidia_peermem", "efa", "ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "nvidia")
_PCI_ADDR = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _counters(port: Path, folder_name: str = "counters") -> dict[str, int]:
    out: dict[str, int] = {}
    folder = port / folder_name
    if folder.is_dir():
        for f in sorted(folder.iterdir()):
            value = _int(f)
            if value is not None:
                out[f.name] = value
    return out


def _rdma(sys_root: Path) -> list[RdmaDevice]:
    devices = []
    base = sys_root / "class" / "infiniband"
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        pci_dev = dev / "device"
        driver = pci_dev / "driver"
        ports = []
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            if not port.name.isdigit():
                continue
            ports.append(
                RdmaPort(
                    port=int(port.name),
                    state=_read(port / "state"),
                    phys_state=_read(port / "phys_state"),
                    rate=_read(port / "rate"),
                    link_layer=_read(port / "link_layer"),
                    counters=_counters(port),
                    hw_counters=_counters(port, "hw_counters")
                    if (port / "hw_counters").is_dir()
                    else None,
                )
            )
        devices.append(
            RdmaDevice(
                name=dev.name,
                driver=driver.resolve().name if driver.exists() else None,
                pci=pci_dev.resolve().name if pci_dev.exists() else None,
                numa_node=_int(pci_dev / "numa_node"),
                ports=ports,
            )
        )
    return devices


def _link(fn: Path) -> PcieLink:
    return PcieLink(
        current_speed=_read(fn / "current_link_speed"),
        current_width=_read(fn / "current_link_width"),
        max_speed=_read(fn / "max_link_speed"),
        max_width=_read(fn / "max_link_width"),
    )


# PCIe ACS extended capability (PCI Express Base Specification, "ACS Extended Capability",
# ID 0x000D): ACS Capability register at +4, ACS Control register at +6.
_ACS_ID = 0x000D


def acs_control(config: bytes) -> int | None:
    """The ACS Control register from a function's configuration space (sysfs ``config``,
    4096 bytes when read as root); None: no ACS capability (or only the 256-byte header)."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == _ACS_ID:
            return int.from_bytes(config[offset + 6 : offset + 8], "little")
        offset = (header >> 20) & 0xFFC
    return None


def _acs(sys_root: Path, bridges: set[str]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for bridge in sorted(bridges):
        try:
            config = (sys_root / "bus" / "pci" / "devices" / bridge / "config").read_bytes()
        except OSError:
            continue  # unreadable: absent from the record (unknown), never "no ACS"
        out[bridge] = acs_control(config)
    return out


def _netdevs(sys_root: Path) -> list[NetDev]:
    """Every interface with a PCI function (/sys/class/net/<name>/device)."""
    out = []
    base = sys_root / "class" / "net"
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        fn = dev / "device"
        if not fn.exists():
            continue  # virtual (lo, bridges, veth)
        # the PCI function it sits on (virtio-net: .../0000:00:03.0/virtio0)
        found = [part for part in fn.resolve().parts if _PCI_ADDR.match(part)]
        if not found:
            continue
        pci = found[-1]
        driver = fn / "driver"
        out.append(
            NetDev(
                name=dev.name,
                driver=driver.resolve().name if driver.exists() else None,
                pci=pci,
                operstate=_read(dev / "operstate"),
                speed_mbps=_int(dev / "speed"),
                mtu=_int(dev / "mtu"),
            )
        )
    return out


def _pci(sys_root: Path, wanted: set[str]) -> list[PciFunction]:
    """NVIDIA GPUs and the functions in ``wanted``, each with the bridges above it."""
    out = []
    base = sys_root / "bus" / "pci" / "devices"
    for link in sorted(base.iterdir()) if base.is_dir() else []:
        vendor = _read(link / "vendor") or ""
        klass = _read(link / "class") or ""
        if not ((vendor == NVIDIA and klass[:6] in GPU_CLASSES) or link.name in wanted):
            continue
        parts = [p for p in link.resolve().parts if _PCI_ADDR.match(p)]
        out.append(
            PciFunction(
                address=link.name,
                pci_class=klass,
                vendor=vendor,
                upstream=[p for p in parts if p != link.name],
                numa_node=_int(link / "numa_node"),
                link=_link(link) if link.name in wanted else None,
            )
        )
    return out


def capture_fabric(
    sys_root: Path = Path("/sys"), *, interval_s: float = 2.0, nccl: bool = False
) -> FabricSection:
    """Everything the fabric checks read. The port counters are read twice ``interval_s``
    apart (a counter rising on an idle link is judged); ``nccl`` adds the NCCL run."""
    rdma = _rdma(sys_root)
    if interval_s > 0 and rdma:
        time.sleep(interval_s)
        for dev in rdma:
            for port in dev.ports:
                folder = sys_root / "class" / "infiniband" / dev.name / "ports" / str(port.port)
                port.counters_after = _counters(folder)
                if port.hw_counters is not None:
                    port.hw_counters_after = _counters(folder, "hw_counters")
    netdevs = _netdevs(sys_root)
    wanted = {d.pci for d in rdma if d.pci} | {n.pci for n in netdevs if n.pci}
    pci = _pci(sys_root, wanted)
    section = FabricSection(
        interval_s=interval_s if rdma else 0.0,
        rdma=rdma,
        pci=pci,
        modules={m: (sys_root / "module" / m).is_dir() for m in MODULES},
        fi_info=run_command(["fi_info", "-p", "efa"]),
        fi_version=run_command(["fi_info", "--version"]),
        netdevs=netdevs,
        acs=_acs(sys_root, {b for f in pci for b in f.upstream}),
    )
    if nccl:
        section.nccl = probe()
    return section
