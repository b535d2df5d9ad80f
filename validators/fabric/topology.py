"""GPU-NIC affinity from the PCI tree the host shows (``nvidia-smi topo -m``'s PIX/PXB: a
GPU and a NIC behind the same PCIe switch), or from the pairs a shape documents where the
guest hides the switches (each device in its own PCI domain)."""

from __future__ import annotations

from imagectl.validators.fabric.model import FabricSection, PciFunction

NVIDIA = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")


def gpus(section: FabricSection) -> list[PciFunction]:
    return [f for f in section.pci if f.vendor == NVIDIA and f.pci_class[:6] in GPU_CLASSES]


def switch_of(f: PciFunction) -> str | None:
    """The bridge the function hangs from, when it is below a PCIe switch (two or more
    bridges above it: root port, then the switch's ports); None at a root port."""
    return f.upstream[-2] if len(f.upstream) >= 2 else None


def nearest_nics(section: FabricSection, nic_addresses: list[str]) -> dict[str, list[str]]:
    """GPU address -> the given NICs that sit behind the same PCIe switch as the GPU."""
    by_addr = {f.address: f for f in section.pci}
    out: dict[str, list[str]] = {}
    for gpu in gpus(section):
        switch = switch_of(gpu)
        out[gpu.address] = sorted(
            a
            for a in nic_addresses
            if switch is not None and a in by_addr and switch in by_addr[a].upstream
        )
    return out
