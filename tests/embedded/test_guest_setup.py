"""The local image's network files leave room for a NIC configured by the kernel command
line (an emulated cloud's private network: ``ip=ADDR:::MASK::NIC:none``).

systemd.network(5): "all configuration files are collectively sorted and processed in
alphanumeric order, regardless of the directories in which they live", and a link gets
the first file whose [Match] fits it. systemd-network-generator turns ``ip=`` into
``/run/systemd/network/90-<nic>.network`` (systemd 252, Debian 12: seen in a booted guest
as 90-ens16.network). The image's catch-all DHCP file was 80-…: it won, ens16 never got its
address, and the two-guest rendezvous failed (the multi-node e2e of 2026-11-26)."""

from __future__ import annotations

import configparser
import fnmatch
from pathlib import PurePosixPath

from imagectl.clouds.local import guest_setup

GENERATED = "90-ens16.network"  # systemd-network-generator's file for ip=...:ens16:...


def _network_files() -> dict[str, list[str]]:
    """name -> the [Match] Name= patterns of each .network file the base writes."""
    found = {}
    for path, text in guest_setup.FILES.items():
        if path.endswith(".network"):
            parser = configparser.ConfigParser(strict=False)
            parser.read_string(text)
            found[PurePosixPath(path).name] = parser.get("Match", "Name", fallback="*").split()
    return found


def test_a_catch_all_network_file_sorts_after_the_generators() -> None:
    files = _network_files()
    assert files, "the base writes no .network file: how does the guest get its address?"
    for name, patterns in files.items():
        if any(fnmatch.fnmatch("ens16", p) for p in patterns):
            assert name > GENERATED, f"{name} would configure ens16 before {GENERATED}"
