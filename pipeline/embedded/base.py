"""The local stack's base image: Debian 12 from the Debian archive, cached by its inputs.

Recipe (needs root, debootstrap, mkfs.ext4 and qemu-img; no loop mounts):

1. ``debootstrap --variant=minbase`` of the release with the base package set;
2. in a chroot: the archive's -updates and -security suites, the pinned
   ``linux-image-<kernel>`` (with its initramfs, made once, natively), the guest set-up
   files of ``guest_setup``, a build key for Packer's SSH communicator;
3. the finished root kept as ``rootfs.tar`` (the candidate is provisioned from it,
   natively, see ``provision``), and ``mkfs.ext4 -d ROOTFS disk.raw`` then
   ``qemu-img convert -O qcow2`` for a bootable disk;
4. the kernel and initrd copied out next to the disk for direct kernel boot.

The result lives in ``<state dir>/local/base/<key>/`` where ``key`` hashes every input
that changes the base (release, mirror, kernel, package set, recipe version): a second
run finds it and skips all of the above. The folder is built under a temporary name
and renamed into place, so a cancelled build never leaves a half base behind.

Step 1's tree (downloads and dpkg's unpacking: most of a base's minutes) is kept as
``<cache dir>/local/debootstrap-<key>.tar`` (``imagectl.paths.cache_dir``), keyed by
release, mirror and package set, so another state folder on this machine starts from it
too. It holds no secret (the build key is made in step 2, per base). Since it becomes
the image's root as root, it is used only while this user owns it and nobody else may
write it; otherwise debootstrap runs again. A build first removes what killed builds and
the older layout left (``sweep_leftovers``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from imagectl.clouds.base_image import BaseImage as Ancestor
from imagectl.clouds.local import guest_setup
from imagectl.clouds.local.spec import SPEC as LOCAL
from imagectl.clouds.local.stack import LocalCloud
from imagectl.core.errors import UserError
from imagectl.core.trustpath import refusal
from imagectl.embedded import procs
from imagectl.embedded.chroot import chroot_ready, remove_root
from imagectl.embedded.disk import make_disk
from imagectl.embedded.procs import Children
from imagectl.paths import cache_dir, state_dir
from imagectl.stacks.resolve import ResolvedStack

# Bump when the recipe changes in a way that changes the disk.
RECIPE_VERSION = 6

# What the reference measured as the smallest set that boots, networks, serves SSH and
# runs Ansible quickly (python3-apt: Ansible's apt module would install it, slowly).
BASE_PACKAGES = (
    "systemd-sysv",
    "udev",
    "kmod",
    "openssh-server",
    "python3",
    "python3-apt",
    "python3-venv",
    "dbus",
    "iproute2",
    "sudo",
    "ca-certificates",
)

SECURITY_MIRROR = "http://deb.debian.org/debian-security"

Note = Callable[[str], None]


@dataclass(frozen=True)
class BaseSpec:
    codename: str
    mirror: str
    kernel: str
    packages: tuple[str, ...]
    disk_gib: int

    @classmethod
    def from_stack(cls, resolved: ResolvedStack) -> BaseSpec:
        stack = resolved.stack
        local = stack.clouds.section_of(LocalCloud)
        if local is None:
            raise UserError(
                f"stack '{stack.name}' has no clouds.local section",
                hint="The local run needs clouds.local (kernel, mirror, packages)",
            )
        if stack.os.distro != "debian":
            raise UserError(
                f"the local base image is built with debootstrap from Debian; stack "
                f"'{stack.name}' asks for {stack.os.distro} {stack.os.release}",
                hint="Set os.distro: debian and os.release: '12' for the local stack",
            )
        return cls(
            codename=stack.os.codename,
            mirror=local.mirror.rstrip("/"),
            kernel=local.kernel,
            packages=BASE_PACKAGES,
            disk_gib=local.build.disk_gib,
        )

    def debootstrap_key(self) -> str:
        body = {"codename": self.codename, "mirror": self.mirror, "packages": sorted(self.packages)}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]

    def key(self) -> str:
        body = {
            "recipe": RECIPE_VERSION,
            "codename": self.codename,
            "mirror": self.mirror,
            "kernel": self.kernel,
            "packages": sorted(self.packages),
            "disk_gib": self.disk_gib,
            "guest_files": guest_setup.FILES,
            "enable": guest_setup.ENABLE,
            "mask": guest_setup.MASK,
        }
        raw = json.dumps(body, sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:16]


def ancestry(spec: BaseSpec) -> Ancestor:
    """The local candidate's base image as its record, manifest, SBOM and attestation name
    it: debootstrap of the release from the mirror, with the kernel, by the base's key."""
    return Ancestor(
        cloud=LOCAL.name,
        id=f"debian-{spec.codename}-{spec.key()}",
        name=f"debootstrap {spec.codename} from {spec.mirror}, kernel {spec.kernel}",
        query=f"debootstrap {spec.codename} {spec.mirror}",
    )


@dataclass(frozen=True)
class BaseImage:
    folder: Path
    spec: BaseSpec
    cached: bool

    @property
    def disk(self) -> Path:
        return self.folder / "disk.qcow2"

    @property
    def kernel(self) -> Path:
        return self.folder / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.folder / "initrd.img"

    @property
    def build_key(self) -> Path:
        """Private key whose public half is root's authorized key in the base (Packer's)."""
        return self.folder / "id_ed25519"


def base_root() -> Path:
    return state_dir() / LOCAL.name / "base"


def debootstrap_tree(spec: BaseSpec) -> Path:
    """Where the debootstrap tree of ``spec`` is kept for every state folder of this user
    (used only when ``cached_tree`` finds it)."""
    folder = cache_dir() / LOCAL.name
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / f"debootstrap-{spec.debootstrap_key()}.tar"


def cached_tree(spec: BaseSpec) -> Path | None:
    """The kept debootstrap tree of ``spec`` when there is one to trust."""
    tarball = debootstrap_tree(spec)
    return tarball if _trusted(tarball) else None


def _trusted(tarball: Path) -> bool:
    """A cached tree only this user (or root) could have made: a plain file (no symlink),
    and neither it nor any folder above it owned by another user or writable by others
    (``imagectl.core.trustpath.refusal``: it is unpacked as root into the image's root).
    Refused, it is made again."""
    try:
        plain = tarball.is_file() and not tarball.is_symlink()
    except OSError:
        return False
    return plain and refusal(tarball, "cached debootstrap tree") is None


def sweep_leftovers() -> list[Path]:
    """Remove what earlier builds left behind and nothing reads, and return it: a
    debootstrap tree's partial copy whose writer is gone (killed while writing, about
    350 MB), a base build's work folder whose builder is gone (its chroot's mounts are
    unmounted first; one that keeps a mount stays), and the tree a state folder kept
    before it moved to the cache folder."""
    gone = []
    for work in base_root().glob(".*.build-*"):
        pid = work.name.rsplit("-", 1)[-1]
        if work.is_dir() and pid.isdigit() and not procs.alive(int(pid)):
            try:
                remove_root(work / "rootfs")
            except RuntimeError:  # still mounted below: never delete through a bind
                continue
            shutil.rmtree(work, ignore_errors=True)
            gone.append(work)
    for partial in (cache_dir() / LOCAL.name).glob(".debootstrap-*.tar.*.partial"):
        pid = partial.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not procs.alive(int(pid)):
            partial.unlink(missing_ok=True)
            gone.append(partial)
    for old in base_root().glob("debootstrap-*.tar"):
        old.unlink(missing_ok=True)
        gone.append(old)
    return gone


def find_base(spec: BaseSpec) -> BaseImage | None:
    folder = base_root() / spec.key()
    needed = ("disk.qcow2", "rootfs.tar", "vmlinuz", "initrd.img", "id_ed25519", "base.json")
    if all((folder / n).is_file() for n in needed):
        return BaseImage(folder=folder, spec=spec, cached=True)
    return None


def ensure_base(
    spec: BaseSpec, children: Children, note: Note = lambda _: None, *, rebuild: bool = False
) -> BaseImage:
    """The cached base for ``spec``, built first if missing."""
    found = None if rebuild else find_base(spec)
    if found:
        note(f"cached base {found.folder.name}")
        return found
    _check_tools()
    for path in sweep_leftovers():
        note(f"removed {path} (left by an earlier build, read by none)")
    final = base_root() / spec.key()
    work = base_root() / f".{spec.key()}.build-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        _build(spec, work, children, note)
        remove_root(work / "rootfs")
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
    finally:
        remove_root(work / "rootfs")
        shutil.rmtree(work, ignore_errors=True)
    return BaseImage(folder=final, spec=spec, cached=False)


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise UserError(
            "building the local base image needs root (debootstrap and chroot)",
            hint="Run as root, e.g. `sudo .venv/bin/imagectl run --stack local`",
        )
    for tool, package in (
        ("debootstrap", "debootstrap"),
        ("mkfs.ext4", "e2fsprogs"),
        ("qemu-img", "qemu-utils"),
        ("ssh-keygen", "openssh-client"),
    ):
        if shutil.which(tool) is None:
            raise UserError(
                f"'{tool}' is not installed; the local base image needs it",
                hint=f"Install it with: apt-get install -y {package}",
            )


def _build(spec: BaseSpec, work: Path, children: Children, note: Note) -> None:
    rootfs = work / "rootfs"
    log = work / "base.log"
    t0 = time.monotonic()
    tarball = debootstrap_tree(spec)
    if _trusted(tarball):
        note(f"debootstrap tree from {tarball}")
        rootfs.mkdir()
        children.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(tarball)], name="tar", log=log
        )
    else:
        note(f"debootstrap {spec.codename} ({len(spec.packages)} packages) from {spec.mirror}")
        children.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(spec.packages),
                spec.codename,
                str(rootfs),
                spec.mirror,
            ],
            name="debootstrap",
            log=log,
            timeout=1800,
        )
        # The debootstrap stage alone (downloads dominate) is kept: a recipe or kernel
        # change, or another state folder, starts from here.
        partial = tarball.with_name(f".{tarball.name}.{os.getpid()}.partial")
        try:
            children.run(
                ["tar", "-C", str(rootfs), "--numeric-owner", "-cpf", str(partial), "."],
                name="tar",
                log=log,
            )
            partial.chmod(0o644)
            os.replace(partial, tarball)
        finally:
            partial.unlink(missing_ok=True)
    t_boot = time.monotonic() - t0
    _write_guest_files(rootfs, spec)
    with chroot_ready(rootfs):  # the guest's own resolv.conf is written below
        env = {
            "DEBIAN_FRONTEND": "noninteractive",
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LC_ALL": "C",
        }
        note(f"kernel linux-image-{spec.kernel} from {spec.codename}-security (chroot)")
        chroot = ["chroot", str(rootfs)]
        children.run([*chroot, "apt-get", "update"], name="apt-get update", log=log, env=env)
        # The initrd is built here, natively, once (update_initramfs=no afterwards).
        (rootfs / "etc/initramfs-tools/update-initramfs.conf").write_text("update_initramfs=yes\n")
        children.run(
            [*chroot, "apt-get", "install", "-y", "--no-install-recommends",
             "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
             f"linux-image-{spec.kernel}"],
            name="apt-get install kernel",
            log=log,
            env=env,
            timeout=1800,
        )  # fmt: skip
        note("guest set-up: networkd, first-boot host key, fw_cfg key unit, timers masked")
        _write_guest_files(rootfs, spec)
        for unit in guest_setup.ENABLE:
            children.run([*chroot, "systemctl", "enable", unit], name="systemctl", log=log)
        for unit in guest_setup.MASK:
            children.run([*chroot, "systemctl", "mask", unit], name="systemctl", log=log)
        children.run([*chroot, "apt-get", "clean"], name="apt-get clean", log=log, env=env)
    # No baked host keys, an empty machine-id: the image's first boot makes its own.
    for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (rootfs / "etc/machine-id").write_text("")
    dbus_id = rootfs / "var/lib/dbus/machine-id"
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    # Packer's communicator logs in as root with this key; the hygiene role removes it.
    key = work / "id_ed25519"
    children.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "imagectl-build", "-f", str(key)],
        name="ssh-keygen",
    )
    ssh_dir = rootfs / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    (ssh_dir / "authorized_keys").chmod(0o600)
    shutil.copyfile(rootfs / f"boot/vmlinuz-{spec.kernel}", work / "vmlinuz")
    shutil.copyfile(rootfs / f"boot/initrd.img-{spec.kernel}", work / "initrd.img")
    fw_cfg = _kernel_config(rootfs, spec.kernel, "CONFIG_FW_CFG_SYSFS")
    note("root file system kept as rootfs.tar (the candidate is provisioned from it)")
    children.run(
        ["tar", "-C", str(rootfs), "--numeric-owner", "-cpf", str(work / "rootfs.tar"), "."],
        name="tar",
        log=log,
    )
    note(f"disk: mkfs.ext4 -d ({spec.disk_gib} GiB) + qemu-img convert")
    make_disk(children, rootfs, work / "disk.qcow2", spec.disk_gib, log=log)
    meta = {
        "key": spec.key(),
        "codename": spec.codename,
        "mirror": spec.mirror,
        "kernel": spec.kernel,
        "packages": list(spec.packages),
        "recipe": RECIPE_VERSION,
        "fw_cfg_sysfs": fw_cfg,
        "debootstrap_s": round(t_boot, 1),
        "total_s": round(time.monotonic() - t0, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (work / "base.json").write_text(json.dumps(meta, indent=2) + "\n")


def _write_guest_files(rootfs: Path, spec: BaseSpec) -> None:
    sources = (
        f"deb {spec.mirror} {spec.codename} main\n"
        f"deb {spec.mirror} {spec.codename}-updates main\n"
        f"deb {SECURITY_MIRROR} {spec.codename}-security main\n"
    )
    (rootfs / "etc/apt/sources.list").write_text(sources)
    for rel, text in guest_setup.FILES.items():
        path = rootfs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(text)
        path.chmod(0o755 if rel in guest_setup.EXECUTABLE else 0o644)


def _kernel_config(rootfs: Path, kernel: str, option: str) -> str:
    config = rootfs / f"boot/config-{kernel}"
    if not config.is_file():
        return "unknown"
    for line in config.read_text(errors="replace").splitlines():
        if line.startswith(f"{option}="):
            return line.split("=", 1)[1]
    return "n"
