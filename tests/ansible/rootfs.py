"""A Debian 12 root file system to run the roles in: debootstrap once a day, then copies.

``debootstrap --variant=minbase bookworm`` with what a cloud image has before
provisioning (python3, python3-apt, systemd, sudo, ca-certificates) takes minutes, so the
result is cached as a tarball keyed by date under ``IMAGECTL_TEST_CACHE`` (default
``/tmp/imagectl-test-cache``); each test unpacks a fresh copy. While tasks run, the
copy is made ready by the production ``imagectl.embedded.chroot.chroot_ready`` (mounts, DNS,
policy-rc.d), the same the local build provisions its candidate in.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

from imagectl.embedded.chroot import chroot_ready

__all__ = ["chroot_ready", "tarball", "unpack"]

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
INCLUDE = ("python3", "python3-apt", "systemd-sysv", "sudo", "ca-certificates")
SOURCES = f"""\
deb {MIRROR} {SUITE} main
deb {MIRROR} {SUITE}-updates main
deb http://deb.debian.org/debian-security {SUITE}-security main
"""


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
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(INCLUDE)}",
            SUITE,
            str(work),
            MIRROR,
        ],
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
