"""Boot a local VM: direct kernel boot, virtio disk and net, SSH on a forwarded port.

The VM is a child owned by ``Children`` (stopped on exit, failure and Ctrl-C). Its
serial console goes to a log file (the boot's progress and the first place to look
when SSH never answers). A per-boot public key is handed in through QEMU's fw_cfg; the
image's ``imagectl-fwcfg-key`` unit installs it under /run for root (nothing is
written to the disk).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.embedded.guest_setup import FW_CFG_KEY_NAME, FW_CFG_LOGIN_NAME
from imagectl.embedded.procs import ChildFailed, Children
from imagectl.embedded.ssh import Ssh

KERNEL_CMDLINE = "root=/dev/vda rw console=ttyS0"


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
    host_address: str = "127.0.0.1"  # where the forwarded SSH port listens on this machine
    serial_log: Path | None = None
    name: str = "imagectl-vm"
    extra_args: list[str] = field(default_factory=list)

    def argv(self) -> list[str]:
        accel = ["-accel", "kvm", "-cpu", "host"] if self.accel == "kvm" else [
            "-accel", "tcg", "-cpu", "max"]  # fmt: skip
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
        return argv + self.extra_args


class Vm:
    """A running VM; ``ssh`` talks to it with the per-boot key."""

    def __init__(self, children: Children, spec: VmSpec, proc: subprocess.Popen[Any], ssh: Ssh):
        self.children = children
        self.spec = spec
        self.proc = proc
        self.ssh = ssh
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def serial_tail(self, lines: int = 15) -> str:
        log = self.spec.serial_log
        if not log or not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def wait_ssh(self, timeout: float) -> float:
        try:
            return self.ssh.wait_ready(timeout=timeout, alive=self.running)
        except ChildFailed as exc:
            raise ChildFailed(
                "qemu", self.spec.argv(), self.proc.poll() or -1,
                f"{exc.tail}\nlast serial console lines:\n{self.serial_tail()}",
            ) from None  # fmt: skip

    def poweroff(self, timeout: float = 60) -> float:
        """Clean shutdown over SSH; the VM is killed if it has not stopped in time."""
        start = time.monotonic()
        if self.running():
            self.ssh.try_run("systemctl poweroff", timeout=15)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        self.children.stop(self.proc, grace_s=5)
        return time.monotonic() - start


def boot(
    children: Children,
    spec: VmSpec,
    key: Path,
    *,
    ssh_timeout: float = 300,
    on_wait: Callable[[float], None] | None = None,
) -> Vm:
    """Start the VM and wait until SSH answers with ``key`` (its .pub went in via fw_cfg)."""
    if not spec.ssh_port:
        spec.ssh_port = free_port()
    if spec.authorized_key is None:
        spec.authorized_key = Path(f"{key}.pub")
    log = spec.serial_log.with_suffix(".qemu.log") if spec.serial_log else None
    out = log.open("ab") if log else subprocess.DEVNULL
    try:
        proc = children.popen(spec.argv(), name="qemu", stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log and not isinstance(out, int):
            out.close()
    vm = Vm(children, spec, proc, Ssh(children, key=key, port=spec.ssh_port))
    vm.wait_ssh(ssh_timeout)
    if on_wait:
        on_wait(time.monotonic() - vm.started)
    return vm
