"""The driver's messages without an Xid (validators/data/kernel_messages.yaml): every entry
cites the driver file and function that prints it, and each is found in a line written as
that function's format string prints it (and not in its neighbours' lines)."""

from __future__ import annotations

import re

import pytest

from imagectl.validators.host.kernel_messages import find_messages, kernel_messages
from imagectl.validators.results import Action

J = "2026-11-20T10:00:03+0000 host kernel: "
# message id -> (lines as the driver prints them, the device, the action)
SAMPLES = {
    "fallen-off-bus-at-probe": (
        [
            "NVRM: The NVIDIA GPU 0000:3b:00.0",
            "NVRM: (PCI ID: 10de:2330) installed in this system has",
            "NVRM: fallen off the bus and is not responding to commands.",
        ],
        "0000:3b:00",
        Action.REBOOT,
    ),
    "fallen-off-bus": (
        ["NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."],
        "0000:3b:00",
        Action.REBOOT,
    ),
    "rm-init-adapter-failed": (
        ["NVRM: GPU 0000:9a:00.0: RmInitAdapter failed! (0x22:0x40:894)"],
        "0000:9a:00",
        Action.REBOOT,
    ),
    "nvlink-training-failed": (
        [
            "nvidia-nvlink: nvlink_core_train_internode_conns_from_swcfg_to_active: Unable to set "
            "link state to ACTIVE for link dev0:link3 "
        ],
        None,
        Action.RESET_GPU,
    ),
    "nvswitch-init-failed": (
        ["nvidia-nvswitch0: Failed to initialize device : -5"],
        None,
        Action.REBOOT,
    ),
}


def test_every_message_cites_the_driver_file_and_function() -> None:
    ids = {m.id for m in kernel_messages()}
    assert ids == set(SAMPLES), "each message needs a sample line here"
    for m in kernel_messages():
        assert "open-gpu-kernel-modules" in m.source and re.search(r"\w+\.c \w+\(\)", m.source), (
            m.id
        )


@pytest.mark.parametrize("mid", sorted(SAMPLES))
def test_each_message_is_read_as_the_driver_writes_it(mid: str) -> None:
    lines, bus, action = SAMPLES[mid]
    (seen,) = find_messages("".join(f"{J}{line}\n" for line in lines))
    assert (seen.message.id, seen.bus) == (mid, bus)
    assert seen.message.action_for(seen.inits[-1] if seen.inits else None)[0] == action


def test_the_probe_message_needs_its_continuation_and_the_init_class_decides() -> None:
    # only the first of the driver's three lines (another message cut it off): not the fault
    assert find_messages(f"{J}NVRM: The NVIDIA GPU 0000:3b:00.0\n{J}NVRM: loading\n") == []
    (fw,) = find_messages(f"{J}NVRM: GPU 0000:9a:00.0: RmInitAdapter failed! (0x61:0x56:1750)\n")
    assert fw.message.action_for(fw.inits[-1])[0] == Action.BLOCK_IMAGE
    # an Xid line that says the same words is the Xid catalog's, not these
    assert (
        find_messages(f"{J}NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
        == []
    )
