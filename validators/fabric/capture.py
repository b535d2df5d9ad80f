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


def _counters(port: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    folder = port / "counters"
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
                port.counters_after = _counters(
                    sys_root / "class" / "infiniband" / dev.name / "ports" / str(port.port)
                )
    section = FabricSection(
        interval_s=interval_s if rdma else 0.0,
        rdma=rdma,
        pci=_pci(sys_root, {d.pci for d in rdma if d.pci}),
        modules={m: (sys_root / "module" / m).is_dir() for m in MODULES},
        fi_info=run_command(["fi_info", "-p", "efa"]),
        fi_version=run_command(["fi_info", "--version"]),
    )
    if nccl:
        section.nccl = probe()
    return section
