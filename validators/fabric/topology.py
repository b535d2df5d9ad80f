"""GPU-NIC affinity from the PCI tree the host shows (``nvidia-smi topo -m``'s PIX/PXB: a
GPU and a NIC behind the same PCIe switch), or from the pairs a shape documents where the
guest hides the switches (each device in its own PCI domain)."""

from __future__ import annotations

from imagectl.validators.fabric.model import FabricSection, PciFunction
from imagectl.validators.fabric.parse import fabric_devices, pci_address
from imagectl.validators.nics import Nics

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


def fabric_nics_by_address(fab: FabricSection, nics: Nics) -> dict[str, str]:
    """PCI address -> device name of the shape's fabric NICs."""
    devices = fabric_devices(fab, nics.fabric).items()
    return {pci_address(pci): name for name, pci in devices if pci}


def expected_nearest(fab: FabricSection, nics: Nics) -> dict[str, list[str]]:
    """GPU address -> the NIC names nearest to it: the shape's documented pairs, or the
    fabric NICs behind the GPU's PCIe switch."""
    by_addr = fabric_nics_by_address(fab, nics)
    if nics.gpu_nic_pairs:
        return {
            gpu: sorted(by_addr.get(nic, f"(missing {nic})") for nic in found)
            for gpu, found in nics.pairs().items()
        }
    near = nearest_nics(fab, list(by_addr))
    return {pci_address(g): sorted(by_addr[a] for a in found) for g, found in near.items()}
