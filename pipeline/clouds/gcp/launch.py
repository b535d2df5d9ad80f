"""What a Compute Engine machine series needs at launch (``machine_families.yaml``, each
entry with its source): the network interface type, the boot disk type and the host
maintenance policy. An instance left to the API's defaults (VIRTIO_NET, pd-standard,
MIGRATE) is refused by the accelerator-optimized and G2 series."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from imagectl.errors import UserError
from imagectl.yamlfast import load_data

DATA = Path(__file__).with_name("machine_families.yaml")


@dataclass(frozen=True)
class SeriesLaunch:
    series: str
    nic_type: str  # NetworkInterface.nicType
    boot_disk_type: str  # AttachedDiskInitializeParams.diskType (the zone's diskTypes/<this>)
    on_host_maintenance: str  # Scheduling.onHostMaintenance
    source: str


@functools.cache
def _series() -> dict[str, SeriesLaunch]:
    raw = load_data(DATA)["series"]
    return {
        name: SeriesLaunch(name, str(e["nic_type"]), str(e["boot_disk_types"][0]),
                           str(e["on_host_maintenance"]), str(e["source"]))
        for name, e in raw.items()
    }  # fmt: skip


def series_of(machine_type: str) -> str:
    return machine_type.rsplit("-", 1)[0]


def launch_settings(machine_type: str) -> SeriesLaunch:
    """The launch settings of ``machine_type``'s series; a series imagectl has no data for
    is a clear error naming the file (a guess would be a refused insert after spend)."""
    found = _series().get(series_of(machine_type))
    if found is None:
        known = ", ".join(sorted(_series()))
        raise UserError(
            f"no launch data for Compute Engine machine type {machine_type} (series "
            f"{series_of(machine_type)}) in pipeline/clouds/gcp/machine_families.yaml "
            f"(known: {known})",
            hint="Add its series there (nic_type, boot_disk_types, on_host_maintenance, "
            "source) from Compute Engine's machine family documentation, or validate on a "
            "listed shape",
        )
    return found
