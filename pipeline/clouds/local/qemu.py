"""A local VM's QEMU command line: direct kernel boot, virtio disk and net, SSH on a
forwarded port.

The serial console goes to a log file (the boot's progress and the first place to look
when SSH never answers). Logins are handed in through QEMU's fw_cfg (a key for root, and
"USER KEY" lines); the image's ``imagectl-fwcfg-key`` unit installs them under /run
(nothing is written to the image). ``imagectl.clouds.local.vms`` starts and stops the
local cloud's instances with it; the emulated clouds' guests use it too.
"""

from __future__ import annotations

import functools
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.clouds.local.guest_setup import (
    FW_CFG_HANDOVER_NAME,
    FW_CFG_IMAGE_ID_NAME,
    FW_CFG_KEY_NAME,
    FW_CFG_LOGIN_NAME,
    HANDOVER_PORT,
)
from imagectl.core.fsutil import sha256_file

KERNEL_CMDLINE = "root=/dev/vda rw console=ttyS0"

# The CPU a TCG guest sees. QEMU 7.2's "max" offers AVX2 and SSE4.2, so the guest's glibc
# picks its AVX2/SSE4.2 string and memory routines, which TCG emulates with helpers;
# "qemu64" (x86-64 baseline, SSE2: what Debian 12 and Ubuntu 22.04 are built for) gets
# the SSE2 ones, translated directly. Measured on the local candidate on this kind of
# machine (guest CPU seconds): the boot check 24.2-24.6 -> 17.5-21.6, a validator import
# 8.5-9.3 -> 6.3-6.8; boot to SSH unchanged within its noise (35-43). A guest that runs
# torch keeps "max" (``TORCH_CPU``): torch builds have failed to start without AVX
# (pytorch/pytorch#37577, #43300: SIGILL at import). Under KVM the guest gets the host's.
# RDRAND stays on (TCG emulates it; "max" has it): the kernel seeds its CRNG from it at
# once ("random: crng init done" at 0 s). Without it the seed comes from timer jitter,
# which under TCG on a loaded host may never finish: a plain "qemu64" guest's
# systemd-tmpfiles and journalctl spun in getrandom() until the test's 600 s ran out
# (soft lockups in __x64_sys_getrandom, a CI run of this change); another finished at 12 s.
TCG_CPU = "qemu64,+rdrand"
TORCH_CPU = "max"


def cpu_model(accel: str, tcg_model: str = TCG_CPU) -> str:
    """The ``-cpu`` of a VM on ``accel`` (the Packer build and the local cloud's VMs)."""
    return "host" if accel == "kvm" else tcg_model


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class VmSpec:
    disk: Path
    kernel: Path
    initrd: Path
    accel: str = "tcg"
    memory_mib: int = 2048
    cpus: int = 2
    append: str = KERNEL_CMDLINE
    ssh_port: int = 0
    authorized_key: Path | None = None  # public key for root, handed in via fw_cfg
    logins: Path | None = None  # "USER KEY" lines via fw_cfg: the guest creates each user
    image_id: str = ""  # the image booted, via fw_cfg: the local cloud's instance metadata
    host_address: str = "127.0.0.1"  # where the forwarded SSH port listens on this machine
    serial_log: Path | None = None
    name: str = "imagectl-vm"
    extra_args: list[str] = field(default_factory=list)
    tcg_cpu: str = TCG_CPU  # the -cpu under TCG (TORCH_CPU for a guest that runs torch)
    # A saved boot's VM (imagectl.clouds.local.saved_boot): its QMP socket and the socket
    # of its virtio-serial hand-over port, the hand-over flag, and the saved state it
    # starts from (none: it boots).
    control: tuple[Path, Path] | None = None
    handover: bool = False
    incoming: Path | None = None

    def argv(self) -> list[str]:
        engine = "kvm" if self.accel == "kvm" else "tcg"
        accel = ["-accel", engine, "-cpu", cpu_model(engine, self.tcg_cpu)]
        argv = [
            "qemu-system-x86_64",
            "-name", self.name,
            "-nodefaults",  # no CD-ROM, floppy or VGA: nothing for the guest to probe
            *accel,
            "-smp", str(self.cpus),
            "-m", str(self.memory_mib),
            "-display", "none",
            "-monitor", "none",
            "-serial", f"file:{self.serial_log}" if self.serial_log else "null",
            "-no-reboot",
            "-kernel", str(self.kernel),
            "-initrd", str(self.initrd),
            "-append", self.append,
            "-drive", f"file={self.disk},if=virtio,format=qcow2,cache=unsafe",
            "-netdev", f"user,id=n0,hostfwd=tcp:{self.host_address}:{self.ssh_port}-:22",
            "-device", "virtio-net-pci,netdev=n0",
        ]  # fmt: skip
        if self.authorized_key:
            argv += ["-fw_cfg", f"name={FW_CFG_KEY_NAME},file={self.authorized_key}"]
        if self.logins:
            argv += ["-fw_cfg", f"name={FW_CFG_LOGIN_NAME},file={self.logins}"]
        if self.image_id and "," not in self.image_id:
            argv += ["-fw_cfg", f"name={FW_CFG_IMAGE_ID_NAME},string={self.image_id}"]
        if self.control:
            qmp, port = self.control
            argv += [
                "-device", "virtio-serial-pci,id=vser0",
                "-chardev", f"socket,id=handover,path={port},server=on,wait=off",
                "-device", f"virtserialport,bus=vser0.0,chardev=handover,name={HANDOVER_PORT}",
                "-qmp", f"unix:{qmp},server=on,wait=off",
            ]  # fmt: skip
        if self.handover:
            argv += ["-fw_cfg", f"name={FW_CFG_HANDOVER_NAME},string=1"]
        if self.incoming:
            argv += ["-incoming", f"exec:cat {shlex.quote(str(self.incoming))}"]
        return argv + self.extra_args

    def shape(self) -> dict[str, object]:
        """What a saved boot of this VM depends on: the command line less what is the
        instance's own (its disk, port, logs, sockets, logins, saved state)."""
        return {
            "accel": self.accel,
            "cpu": cpu_model("kvm" if self.accel == "kvm" else "tcg", self.tcg_cpu),
            "cpus": self.cpus,
            "memory_mib": self.memory_mib,
            "kernel": file_digest(self.kernel),
            "initrd": file_digest(self.initrd),
            "append": self.append,
            "image_id": self.image_id,
            "extra_args": list(self.extra_args),
        }


def file_digest(path: Path) -> str:
    """The file's SHA-256 (a kernel or initrd: a copy in another registry is the same)."""
    st = path.stat()
    return _digest(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _digest(path: str, _size: int, _mtime_ns: int) -> str:
    return sha256_file(path)  # once per file and version in a process
