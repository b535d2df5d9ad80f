"""Provision the local candidate's root file system natively, with playbooks/site.yml.

Under TCG emulation every Ansible task in the VM costs seconds to minutes (a package
install, the validator's virtual environment); in a chroot on the host the same tasks
run at native speed. So the local build runs the one play, site.yml with the stack's
Ansible vars, in two passes split by the ``booted`` tag:

1. here, before any VM: every role except the ``booted`` ones, in a chroot of the base
   image's root file system (the ``imagectl_chroot`` connection from
   ``playbooks/connection_plugins``), then ``mkfs.ext4 -d`` to a bootable disk;
2. in Packer's qemu build (``images/local``): only the ``booted`` roles, over SSH on
   the booted disk: the manifest of what the running image really contains, and the
   hygiene role last.

The clouds run site.yml whole, in one pass (no tag filter), on their builders.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from imagectl.embedded.base import BaseImage
from imagectl.embedded.chroot import chroot_ready, remove_root
from imagectl.embedded.disk import make_disk
from imagectl.embedded.procs import Children

Note = Callable[[str], None]
# Roles that must run in the booted image (site.yml tags them): Packer's pass runs these.
BOOTED_TAG = "booted"
# What Packer's qemu source reads from the folder it is given (images/local).
DISK, KERNEL, INITRD, BUILD_KEY = "disk.qcow2", "vmlinuz", "initrd.img", "id_ed25519"


def provisioned_dir(build_folder: Path) -> Path:
    """Where the natively provisioned disk is written: Packer's ``local_base_dir``."""
    return build_folder / "provisioned"


def provision(
    *,
    base: BaseImage,
    build_folder: Path,
    playbook: Path,
    ansible_vars_file: Path,
    ansible_config: Path,
    kernel: str,
    disk_gib: int,
    children: Children,
    note: Note,
    timeout: float = 3600,
) -> Path:
    """Run site.yml (all but the booted roles) in a chroot; write the disk to boot."""
    out = provisioned_dir(build_folder)
    rootfs = build_folder / "rootfs"
    log = build_folder / "provision.log"
    remove_root(rootfs)
    shutil.rmtree(out, ignore_errors=True)
    rootfs.mkdir(parents=True)
    try:
        note(f"root file system from the base image ({base.folder.name}/rootfs.tar)")
        children.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(base.folder / "rootfs.tar")],
            name="tar",
            log=log,
        )
        guest_resolv = rootfs / "etc/resolv.conf"
        resolv_text = guest_resolv.read_text() if guest_resolv.is_file() else None
        inventory = build_folder / "chroot-inventory.ini"
        inventory.write_text(
            f"[image]\n{rootfs} ansible_connection=imagectl_chroot "
            "ansible_python_interpreter=/usr/bin/python3\n"
        )
        bin_dir = Path(sys.executable).parent
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(ansible_config),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        }
        note(f"ansible-playbook {playbook.name} --skip-tags {BOOTED_TAG} (chroot)")
        with chroot_ready(rootfs):
            children.stream(
                [
                    str(bin_dir / "ansible-playbook"),
                    "-i",
                    str(inventory),
                    str(playbook),
                    "--extra-vars",
                    f"@{ansible_vars_file}",
                    "--skip-tags",
                    BOOTED_TAG,
                ],
                name="ansible-playbook (chroot)",
                on_line=lambda line: _progress(line, note),
                log=log,
                env=env,
                timeout=timeout,
            )
        if resolv_text is not None:  # the guest's resolver, not the host's
            guest_resolv.write_text(resolv_text)
        out.mkdir(parents=True)
        note(f"disk: mkfs.ext4 -d ({disk_gib} GiB) + qemu-img convert")
        make_disk(children, rootfs, out / DISK, disk_gib, log=log)
        _boot_files(rootfs, base, kernel, out)
    finally:
        remove_root(rootfs)
    return out


def _boot_files(rootfs: Path, base: BaseImage, kernel: str, out: Path) -> None:
    """The kernel and initrd the provisioned root has (the base's if it has none)."""
    for name, inside, fallback in (
        (KERNEL, rootfs / f"boot/vmlinuz-{kernel}", base.kernel),
        (INITRD, rootfs / f"boot/initrd.img-{kernel}", base.initrd),
    ):
        shutil.copyfile(inside if inside.is_file() else fallback, out / name)
    shutil.copyfile(base.build_key, out / BUILD_KEY)
    (out / BUILD_KEY).chmod(0o600)


def _progress(line: str, note: Note) -> None:
    if line.startswith(("TASK [", "PLAY RECAP")):
        note(line.strip("* ").strip())
    elif line.startswith(("fatal:", "failed:")):
        note(line[:160])
