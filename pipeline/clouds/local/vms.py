"""The local cloud's instances: one QEMU VM each, booted from a registry image.

``start`` boots a VM from a copy-on-write overlay of the image (the image file is never
written), hands the instance's login to the guest the way a cloud's guest agent gets it
(fw_cfg ``opt/imagectl/login``: "USER KEY", see ``imagectl.clouds.local.guest_setup``) and
forwards the guest's SSH port to a free port on 127.0.0.1 only. The VM runs in its own
session, like a cloud instance it outlives the command that launched it: the validation
run terminates it in ``finally``, and ``imagectl reap`` stops one whose TTL passed.

A VM is identified by its pid and the process's start time (``/proc/<pid>/stat`` field
22), so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from imagectl.clouds.local import saved_boot
from imagectl.clouds.local.pids import alive, start_time
from imagectl.clouds.local.qemu import VmSpec, free_port
from imagectl.core.errors import CloudError


@dataclass(frozen=True)
class BootFiles:
    """What boots a local image besides its disk (direct kernel boot) and how."""

    kernel: Path
    initrd: Path
    accel: str = "tcg"


@dataclass(frozen=True)
class RunningVm:
    pid: int
    started: str  # /proc/<pid>/stat start time, in clock ticks since boot
    port: int
    folder: Path
    handover: saved_boot.Handover | None = None  # a saved boot's VM: the host's part to do


def start(
    folder: Path,
    *,
    image_file: Path,
    boot: BootFiles,
    login_user: str,
    public_key: str | None,
    memory_mib: int,
    cpus: int,
    name: str,
    image_id: str = "",
    saved: bool = False,
) -> RunningVm:
    """Start the VM in the background; returns at once (the guest boots asynchronously).
    With ``saved``, from the image's saved boot of its shape or making it
    (``imagectl.clouds.local.saved_boot``): then ``RunningVm.handover`` is to be run (the
    logins come with it) before the guest is reachable."""
    folder.mkdir(parents=True, exist_ok=True)
    overlay = folder / "disk.qcow2"
    spec = VmSpec(
        disk=overlay, kernel=boot.kernel, initrd=boot.initrd, accel=boot.accel,
        memory_mib=memory_mib, cpus=cpus, ssh_port=free_port(),
        serial_log=folder / "serial.log", name=name, image_id=image_id,
    )  # fmt: skip
    backing, handover = image_file, None
    if saved:
        backing, handover = saved_boot.prepare(
            spec, image=image_file, overlay=overlay, sockets=saved_boot.socket_dir(folder)
        )
    done = subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(backing),
         str(spec.disk)],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0:
        if handover:
            saved_boot.discard(handover)
        raise CloudError(f"cannot create the instance disk {spec.disk}: {done.stderr.strip()}")
    if public_key and handover is None:
        spec.logins = folder / "logins"
        spec.logins.write_text(f"{login_user} {public_key.strip()}\n")
    with open(folder / "qemu.log", "ab") as log:
        proc = subprocess.Popen(
            spec.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    started = None
    for _ in range(50):  # /proc/<pid>/stat exists as soon as fork returned
        started = start_time(proc.pid)
        if started:
            break
        time.sleep(0.01)
    if not started:
        raise CloudError(f"qemu exited at once: {serial_tail(folder, 'qemu.log')}")
    if handover:
        saved_boot.own(handover, proc.pid)
    return RunningVm(
        pid=proc.pid, started=started, port=spec.ssh_port, folder=folder, handover=handover
    )


def stop(pid: int, started: str, *, grace_s: float = 10.0) -> None:
    """SIGTERM the VM's process group, SIGKILL it after ``grace_s``; idempotent."""
    if not alive(pid, started):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive(pid, started) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it when this process started it
        time.sleep(0.1)
    if alive(pid, started):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def serial_tail(folder: Path, name: str = "serial.log", lines: int = 12) -> str:
    try:
        text = (folder / name).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def ssh_banner(host: str, port: int, *, timeout_s: float = 5.0) -> bool:
    """True when an SSH server answers on host:port (its version banner, RFC 4253 4.2)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.settimeout(timeout_s)
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False
