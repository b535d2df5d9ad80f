"""What a Compute Engine machine series needs at launch (``machine_families.yaml``, each
entry with its source): the network interface type, the boot disk type and the host
maintenance policy. An instance left to the API's defaults (VIRTIO_NET, pd-standard,
MIGRATE) is refused by the accelerator-optimized and G2 series."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from imagectl.core.yamlfast import load_data

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
    """The launch settings of ``machine_type``'s series. A series without data here (a CPU
    shape, an N1 with attached GPUs) keeps the API's NIC and disk defaults, with
    TERMINATE (valid for every machine type); every stack's GPU validation shape has data
    (tests/clouds/test_gcp_launch.py)."""
    found = _series().get(series_of(machine_type))
    if found is None:
        return SeriesLaunch(series_of(machine_type), "", "", "TERMINATE", "the API's defaults")
    return found
