"""Fault injection writes into a copy of a real ext4 qcow2 disk with debugfs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from needs import require_tool

from imagectl.core.errors import UserError
from imagectl.embedded import disk, faults
from imagectl.embedded.procs import Children
from tests.support import flat

STATUS = """Package: jq
Status: hold ok installed
Priority: optional
Version: 1.6-2.1+deb12u3

Package: chrony
Status: hold ok installed
Version: 4.3-2+deb12u3

Package: sudo
Status: install ok installed
Version: 1.9.13p3-1+deb12u4
"""


def test_unhold_removes_only_the_named_packages_hold():
    out = faults.unhold(STATUS, "jq")
    assert "Package: jq\nStatus: install ok installed" in out
    assert "Package: chrony\nStatus: hold ok installed" in out
    assert out.count("\n") == STATUS.count("\n")


def test_unhold_refuses_a_package_that_is_not_held():
    with pytest.raises(UserError, match="'sudo' is not held"):
        faults.unhold(STATUS, "sudo")


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    for tool in ("mkfs.ext4", "debugfs", "qemu-img"):
        require_tool(tool)
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "etc/ssh").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(STATUS)
    (root / "etc/ssh/sshd_config").write_text("# sshd\n")
    os.utime(root / "etc/ssh/sshd_config", (1_700_000_000, 1_700_000_000))
    raw = tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(root), str(raw), "16M"], check=True)
    qcow2 = tmp_path / "candidate.qcow2"
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(qcow2)], check=True)
    return qcow2


def _cat(qcow2: Path, path: str, tmp: Path) -> str:
    raw = tmp / "check.raw"
    subprocess.run(["qemu-img", "convert", "-O", "raw", str(qcow2), str(raw)], check=True)
    out = subprocess.run(
        ["debugfs", "-R", f"cat {path}", str(raw)], capture_output=True, text=True, check=True
    )
    return out.stdout


def test_unheld_package_fault_changes_a_copy_not_the_candidate(small_disk: Path, tmp_path: Path):
    before = disk.content_id(small_disk)
    dest = tmp_path / "out" / "faulty.qcow2"
    dest.parent.mkdir()
    with Children() as ch:
        fault = faults.inject(
            ch, "unheld-package", small_disk, dest, pinned_packages=["jq", "chrony"]
        )
    assert fault.name == "unheld-package" and "jq" in fault.detail
    assert disk.content_id(small_disk) == before
    assert disk.content_id(dest) != before
    status = _cat(dest, "/var/lib/dpkg/status", tmp_path)
    assert "Package: jq\nStatus: install ok installed" in status
    assert "Package: chrony\nStatus: hold ok installed" in status
    assert "Package: jq\nStatus: hold" in _cat(small_disk, "/var/lib/dpkg/status", tmp_path)


def test_ssh_host_key_fault_bakes_a_key(small_disk: Path, tmp_path: Path):
    dest = tmp_path / "faulty.qcow2"
    with Children() as ch:
        faults.inject(ch, "ssh-host-key", small_disk, dest, pinned_packages=["jq"])
    key = _cat(dest, "/etc/ssh/ssh_host_ed25519_key", tmp_path)
    assert key.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert _cat(dest, "/etc/ssh/ssh_host_ed25519_key.pub", tmp_path).startswith("ssh-ed25519 ")
    assert _cat(small_disk, "/etc/ssh/ssh_host_ed25519_key", tmp_path) == ""
    # dated like the system set-up, so a validator sees it as older than the first boot
    raw = tmp_path / "dest.raw"
    subprocess.run(["qemu-img", "convert", "-O", "raw", str(dest), str(raw)], check=True)
    stat = subprocess.run(
        ["debugfs", "-R", "stat /etc/ssh/ssh_host_ed25519_key", str(raw)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"mtime: 0x{1_700_000_000:08x}" in flat(stat)
