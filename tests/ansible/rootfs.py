"""A Debian 12 root file system to run the roles in: debootstrap once a day, then copies.

``debootstrap --variant=minbase bookworm`` with what a cloud image has before
provisioning (python3, python3-apt, systemd, sudo, ca-certificates) takes minutes, so the
result is cached as a tarball keyed by date under ``IMAGECTL_TEST_CACHE`` (default
``/tmp/imagectl-test-cache``); each test unpacks a fresh copy. While tasks run, the
copy has /proc, /sys and /dev mounted and a policy-rc.d that stops package scripts from
starting daemons on the host (standard for chroots); both are removed afterwards.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
INCLUDE = ("python3", "python3-apt", "systemd-sysv", "sudo", "ca-certificates")
SOURCES = f"""\
deb {MIRROR} {SUITE} main
deb {MIRROR} {SUITE}-updates main
deb http://deb.debian.org/debian-security {SUITE}-security main
"""
POLICY_RC = "#!/bin/sh\n# imagectl test chroot: package scripts must not start daemons\nexit 101\n"


def cache_dir() -> Path:
    path = Path(os.environ.get("IMAGECTL_TEST_CACHE", "/tmp/imagectl-test-cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def tarball(today: dt.date | None = None) -> Path:
    """The cached rootfs tarball of today, made with debootstrap when missing."""
    day = (today or dt.date.today()).strftime("%Y%m%d")
    out = cache_dir() / f"debian12-minbase-{day}.tar"
    if out.exists():
        return out
    work = cache_dir() / f"build-{day}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE,
         str(work), MIRROR],
        check=True,
        capture_output=True,
    )
    (work / "etc/apt/sources.list").write_text(SOURCES)
    # Like a cloud image: package lists current for its sources, no downloaded .debs.
    shutil.copyfile("/etc/resolv.conf", work / "etc/resolv.conf")
    subprocess.run(["chroot", str(work), "apt-get", "update", "-qq"], check=True)
    subprocess.run(["chroot", str(work), "apt-get", "clean"], check=True)
    partial = out.with_suffix(".partial")
    subprocess.run(["tar", "-C", str(work), "-cf", str(partial), "."], check=True)
    partial.rename(out)
    shutil.rmtree(work, ignore_errors=True)
    for old in cache_dir().glob("debian12-minbase-*.tar"):
        if old != out:
            old.unlink()
    return out


def unpack(tar: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-C", str(dest), "-xf", str(tar)], check=True)
    return dest


@contextmanager
def chroot_ready(root: Path) -> Iterator[Path]:
    """Mount /proc, /sys, /dev(/pts), give DNS and block daemon starts; undo afterwards."""
    mounts = [
        (["-t", "proc", "proc"], root / "proc"),
        (["-t", "sysfs", "sysfs"], root / "sys"),
        (["--bind", "/dev"], root / "dev"),
        (["--bind", "/dev/pts"], root / "dev/pts"),
    ]
    done: list[Path] = []
    policy = root / "usr/sbin/policy-rc.d"
    resolv = root / "etc/resolv.conf"
    try:
        for args, target in mounts:
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", *args, str(target)], check=True)
            done.append(target)
        policy.write_text(POLICY_RC)
        policy.chmod(0o755)
        if resolv.is_symlink() or resolv.exists():
            resolv.unlink()
        shutil.copyfile("/etc/resolv.conf", resolv)
        yield root
    finally:
        for target in reversed(done):
            subprocess.run(["umount", "-l", str(target)], check=False)
        policy.unlink(missing_ok=True)
