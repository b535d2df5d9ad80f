"""A root file system made ready for package work in a chroot, and undone afterwards.

Used where the local build works on a Debian root natively (the base image's kernel,
the candidate's provisioning with site.yml) and by the role tests. While inside:
/proc, /sys, /dev and /dev/pts are mounted, the host's resolver is copied in, and a
policy-rc.d stops package scripts from starting daemons on the host (the standard for
chroots). Leaving unmounts (lazily, so a busy mount never blocks) and removes the
policy; the resolver stays for the caller to replace with the guest's own.

Never delete a root while it is ready: /dev is the host's own, bind-mounted.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

POLICY_RC = "#!/bin/sh\n# imagectl chroot: package scripts must not start daemons\nexit 101\n"
MOUNTS = (
    (("-t", "proc", "proc"), "proc"),
    (("-t", "sysfs", "sysfs"), "sys"),
    (("--bind", "/dev"), "dev"),
    (("--bind", "/dev/pts"), "dev/pts"),
)


@contextlib.contextmanager
def chroot_ready(root: Path) -> Iterator[Path]:
    """Mount, give DNS, block daemon starts; undo all of it on the way out."""
    done: list[Path] = []
    policy = root / "usr/sbin/policy-rc.d"
    resolv = root / "etc/resolv.conf"
    try:
        for args, rel in MOUNTS:
            target = root / rel
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", *args, str(target)], check=True, capture_output=True)
            done.append(target)
        policy.write_text(POLICY_RC)
        policy.chmod(0o755)
        if resolv.is_symlink() or resolv.exists():
            resolv.unlink()
        shutil.copyfile("/etc/resolv.conf", resolv)
        yield root
    finally:
        for target in reversed(done):
            subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)
        policy.unlink(missing_ok=True)


def unmount_below(root: Path) -> None:
    """Lazy-unmount anything still mounted below ``root`` (after a killed run)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return
    prefix = str(root.resolve()) + "/"
    targets = [m.split()[1] for m in mounts if len(m.split()) > 1]
    for target in sorted((t for t in targets if t.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)


RMTREE_ATTEMPTS = 25  # 5 s in all


def remove_root(root: Path) -> None:
    """Delete a root file system folder, unmounting first (never through a /dev bind)."""
    unmount_below(root)
    if any(
        line.split()[1].startswith(str(root.resolve()) + "/")
        for line in Path("/proc/mounts").read_text().splitlines()
        if len(line.split()) > 1
    ):
        raise RuntimeError(f"{root} still has mounts below it; not deleting it")
    # After Ctrl-C the chroot's processes are SIGKILLed as a group, but a member can still
    # be writing while it dies (seen under load: a folder rmtree had just emptied gained a
    # file, and the whole rootfs stayed). Deleting again once they are gone finishes it.
    for _ in range(RMTREE_ATTEMPTS):
        shutil.rmtree(root, ignore_errors=True)
        if not root.exists():
            return
        time.sleep(0.2)
