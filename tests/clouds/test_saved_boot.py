"""Saved boots (imagectl.clouds.local.saved_boot): which VM saves, which restores, and the
host's side of the hand-over against QEMU's QMP and the guest's port
(tests/fakes/qemu_control.py). The guest's side runs in the e2e tests' booted guests
(tests/embedded/test_e2e_validate_clouds.py: restored, logged in as each cloud's user,
with the host's clock)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fakes.qemu_control import FakeVm

from imagectl.clouds.local import saved_boot
from imagectl.clouds.local.guest_setup import (
    FW_CFG_HANDOVER_NAME,
    FW_CFG_LOGIN_NAME,
    HANDOVER_PORT,
)
from imagectl.clouds.local.qemu import VmSpec


@pytest.fixture
def image(tmp_path: Path) -> Path:
    folder = tmp_path / "registry" / "local-a" / "images"
    folder.mkdir(parents=True)
    (tmp_path / "vmlinuz").write_bytes(b"kernel")
    (tmp_path / "initrd.img").write_bytes(b"initrd")
    path = folder / "abc.qcow2"
    path.write_bytes(b"QFI\xfbimage")
    return path


def _spec(tmp_path: Path, **kw: object) -> VmSpec:
    return VmSpec(tmp_path / "unset", tmp_path / "vmlinuz", tmp_path / "initrd.img", **kw)  # type: ignore[arg-type]


def _prepare(tmp_path: Path, image: Path, name: str, **kw: object):  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, **kw)
    folder = tmp_path / "instances" / name
    backing, handover = saved_boot.prepare(
        spec, image=image, overlay=folder / "disk.qcow2", sockets=folder
    )
    return spec, backing, handover


def test_the_first_vm_saves_the_shape_a_second_boots_plainly_until_the_state_exists(
    tmp_path: Path, image: Path
) -> None:
    spec, backing, first = _prepare(tmp_path, image, "a")
    assert first is not None and first.mode == "save"
    assert backing == image.resolve()  # the saving VM's disk is an overlay of the image
    assert spec.disk == first.folder / "disk.qcow2"
    assert first.folder.parent.name == "abc.qcow2.boots"
    argv = spec.argv()
    assert f"name={FW_CFG_HANDOVER_NAME},string=1" in argv and "-incoming" not in argv
    # the hand-over goes over a virtio-serial port (an emulated UART's transmitter can
    # stall across the save), the console stays the one serial port
    assert argv.count("-serial") == 1
    assert f"socket,id=handover,path={first.serial},server=on,wait=off" in argv
    assert f"virtserialport,bus=vser0.0,chardev=handover,name={HANDOVER_PORT}" in argv
    assert f"unix:{first.qmp},server=on,wait=off" in argv

    # while the first saves, another VM of the shape boots as before (logins by fw_cfg)
    spec, backing, second = _prepare(tmp_path, image, "b")
    assert second is None and backing == image and spec.control is None
    spec.logins = tmp_path / "logins"
    assert any(a.startswith(f"name={FW_CFG_LOGIN_NAME},") for a in spec.argv())

    (first.folder / "disk.qcow2").write_bytes(b"QFI\xfbboot")
    (first.folder / "state").write_bytes(b"QEVM")
    spec, backing, third = _prepare(tmp_path, image, "c")
    assert third is not None and third.mode == "restore" and third.folder == first.folder
    assert backing == first.folder / "disk.qcow2"
    assert spec.disk == (tmp_path / "instances" / "c" / "disk.qcow2").resolve()
    i = spec.argv().index("-incoming")
    assert spec.argv()[i + 1] == f"exec:cat {first.folder / 'state'}"


def test_a_second_nic_or_another_shape_never_shares_a_saved_boot(
    tmp_path: Path, image: Path
) -> None:
    keys = {
        saved_boot.key(_spec(tmp_path, **kw), image)  # type: ignore[arg-type]
        for kw in ({}, {"memory_mib": 4096}, {"cpus": 1}, {"tcg_cpu": "max"},
                   {"image_id": "sha256:x"}, {"append": "root=/dev/vda ro"})
    }  # fmt: skip
    assert len(keys) == 6
    base = saved_boot.key(_spec(tmp_path), image)
    (tmp_path / "vmlinuz").write_bytes(b"another kernel")  # the same path, new content
    assert saved_boot.key(_spec(tmp_path), image) != base
    _, backing, handover = _prepare(tmp_path, image, "vpc", extra_args=["-netdev", "socket"])
    assert handover is None and backing == image


def test_a_hard_link_of_the_image_shares_its_saved_boot_a_copy_does_not(
    tmp_path: Path, image: Path
) -> None:
    """Another registry holds the image as a hard link (LocalProvider._place): the same
    file, the same saved boot; a copy may differ, so it gets its own."""
    linked, copied = tmp_path / "linked.qcow2", tmp_path / "copied.qcow2"
    os.link(image, linked)
    copied.write_bytes(image.read_bytes())
    spec = _spec(tmp_path)
    assert saved_boot.key(spec, linked) == saved_boot.key(spec, image)
    assert saved_boot.key(spec, copied) != saved_boot.key(spec, image)


def test_a_claim_whose_vm_is_gone_is_taken_over_a_live_one_is_not(
    tmp_path: Path, image: Path
) -> None:
    _, _, first = _prepare(tmp_path, image, "a")
    assert first is not None
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        saved_boot.own(first, sleeper.pid)
        assert _prepare(tmp_path, image, "b")[2] is None  # its VM still boots
    finally:
        sleeper.kill()
        sleeper.wait()
    _, _, again = _prepare(tmp_path, image, "c")  # killed before its save: abandoned
    assert again is not None and again.mode == "save" and again.folder == first.folder


def _handover(tmp_path: Path, mode: str) -> saved_boot.Handover:
    folder = tmp_path / "boots" / "k"
    folder.mkdir(parents=True, exist_ok=True)
    inst = tmp_path / "inst"
    inst.mkdir(exist_ok=True)
    sockets = saved_boot.socket_dir(inst)  # as the local cloud places them: where they fit
    sockets.mkdir(exist_ok=True)
    return saved_boot.Handover(
        mode,
        folder,
        inst / "disk.qcow2",
        sockets / "qmp.sock",
        sockets / "serial.sock",  # type: ignore[arg-type]
    )


def _hand_over(h: saved_boot.Handover, vm: FakeVm, logins: list[tuple[str, str]]) -> None:
    try:
        saved_boot.hand_over(h, logins, alive=lambda: True, timeout_s=20)
    finally:
        vm.close()


def test_the_saving_vm_is_paused_moved_to_its_own_disk_saved_then_handed_its_login(
    tmp_path: Path,
) -> None:
    h = _handover(tmp_path, "save")
    vm = FakeVm(h.qmp, h.serial)
    before = time.time()
    _hand_over(h, vm, [("ubuntu", "ssh-ed25519 AAAA key\n")])
    names = [c for c, _ in vm.commands if c not in ("qmp_capabilities", "query-migrate")]
    # paused before the disk moves and the state is taken; running again after
    assert names == ["stop", "blockdev-snapshot-sync", "migrate", "cont"], vm.commands
    snap = dict(vm.commands)["blockdev-snapshot-sync"]
    assert snap == {"device": "virtio0", "format": "qcow2", "snapshot-file": str(h.overlay)}
    assert h.overlay.exists() and vm.status == "running"
    assert (h.folder / "state").read_bytes().startswith(b"QEVM")
    assert not (h.folder / "state.partial").exists()
    clock, *rest = vm.received
    assert clock.startswith("clock ") and before <= float(clock.split()[1]) <= time.time()
    assert rest == ["login ubuntu ssh-ed25519 AAAA key"]


def test_a_failed_save_lets_the_vm_go_on_and_leaves_no_saved_boot(tmp_path: Path) -> None:
    h = _handover(tmp_path, "save")
    vm = FakeVm(h.qmp, h.serial, migrate_fails=True)
    _hand_over(h, vm, [("azureuser", "ssh-ed25519 BBBB")])
    assert vm.commands[-1][0] == "cont" and vm.status == "running"
    assert not h.folder.exists()  # never restored from: the next VM saves anew
    assert vm.received[1:] == ["login azureuser ssh-ed25519 BBBB"]


def test_a_restored_vm_is_resumed_once_its_state_loaded_then_handed_its_login(
    tmp_path: Path,
) -> None:
    h = _handover(tmp_path, "restore")
    vm = FakeVm(h.qmp, h.serial, incoming=True)
    _hand_over(h, vm, [("imagectl", "ssh-ed25519 CCCC")])
    names = [c for c, _ in vm.commands if c != "qmp_capabilities"]
    assert names[0] == "query-status" and names[-1] == "cont"  # no cont while loading
    assert set(names[:-1]) == {"query-status"}
    assert vm.received[1:] == ["login imagectl ssh-ed25519 CCCC"]


def test_a_hand_over_the_guest_lost_is_sent_again(tmp_path: Path) -> None:
    h = _handover(tmp_path, "restore")
    vm = FakeVm(h.qmp, h.serial, incoming=True, lose_first=True)
    _hand_over(h, vm, [("u", "k")])
    assert vm.handovers == 2 and vm.received[1:] == ["login u k"]


def test_a_restored_guest_silent_on_its_port_is_connected_to_again(tmp_path: Path) -> None:
    """A restored guest that never saw its port open says nothing on the first connection
    (its READY writes block); the host connects again after ``reconnect_s`` and the
    hand-over goes through, long before the reach timeout."""
    h = _handover(tmp_path, "restore")
    vm = FakeVm(h.qmp, h.serial, incoming=True, deaf_first=True)
    try:
        started = time.monotonic()
        saved_boot.hand_over(h, [("u", "k")], alive=lambda: True, timeout_s=60, reconnect_s=1)
        assert time.monotonic() - started < 15
        assert vm.connections == 2 and vm.received[1:] == ["login u k"]
    finally:
        vm.close()


def test_a_guest_silent_after_its_hand_over_is_an_error_in_seconds_not_at_the_timeout(
    tmp_path: Path,
) -> None:
    """The hang this port had on a UART: the guest was saved, read its hand-over and said
    nothing more. The host stops waiting ``done_within_s`` after sending, naming why,
    long before the reach timeout."""
    h = _handover(tmp_path, "save")
    vm = FakeVm(h.qmp, h.serial, mute_after_save=True)
    try:
        started = time.monotonic()
        with pytest.raises(saved_boot.HandoverError, match="said nothing for 1 s"):
            saved_boot.hand_over(h, [("u", "k")], alive=lambda: True, timeout_s=60,
                                 done_within_s=1)  # fmt: skip
        assert time.monotonic() - started < 15
        assert vm.received[1:] == ["login u k"]  # it was sent, once
        assert vm.handovers == 1
    finally:
        vm.close()


def test_a_port_closed_after_the_hand_over_is_named_as_closed_not_as_silence(
    tmp_path: Path,
) -> None:
    h = _handover(tmp_path, "save")
    vm = FakeVm(h.qmp, h.serial, mute_after_save=True)
    try:
        threading.Timer(1.0, vm.die).start()  # the guest's end of the port goes away
        started = time.monotonic()
        with pytest.raises(saved_boot.HandoverError, match="closed its hand-over port"):
            saved_boot.hand_over(h, [("u", "k")], alive=lambda: True, timeout_s=60,
                                 done_within_s=30)  # fmt: skip
        assert time.monotonic() - started < 15
    finally:
        vm.close()


def test_a_vm_that_stops_ends_the_hand_over_at_once(tmp_path: Path) -> None:
    h = _handover(tmp_path, "save")
    vm = FakeVm(h.qmp, h.serial)
    vm.status = "paused"  # never says it is ready
    try:
        started = time.monotonic()
        with pytest.raises(saved_boot.HandoverError, match="stopped"):
            saved_boot.hand_over(h, [], alive=lambda: time.monotonic() - started < 1.5,
                                 timeout_s=60)  # fmt: skip
        assert time.monotonic() - started < 10
    finally:
        vm.close()


def test_a_state_that_does_not_load_is_an_error_naming_it(tmp_path: Path) -> None:
    h = _handover(tmp_path, "restore")
    vm = FakeVm(h.qmp, h.serial, incoming=True)
    vm.die()
    with pytest.raises(saved_boot.HandoverError, match="saved state"):
        saved_boot.hand_over(h, [], alive=lambda: False, timeout_s=2)
