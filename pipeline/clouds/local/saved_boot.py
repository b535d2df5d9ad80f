"""Saved boots: a local VM starts from the saved state of a finished boot instead of booting.

Booting the local candidate under TCG costs about 55 s of CPU to a login (systemd, then
the image's boot check); starting from a saved state about 7 (measured on the local
candidate, QEMU 7.2, on a 2-core machine). The local cloud's instances and the emulated
clouds' guests use it; a VM that cannot (a second NIC, a shape being saved by another VM)
boots as before.

Per image and *shape* (the QEMU command line less what is the instance's own:
``VmSpec.shape``, with QEMU's version and the image file's identity), a folder beside the
image, ``<image>.boots/<key>/``:

- the first VM of a shape claims it (``mkdir``), boots from ``disk.qcow2`` there (an
  overlay of the image) with the hand-over flag (fw_cfg ``opt/imagectl/handover``). When
  the guest's ``imagectl-handover`` says it is ready (the boot has finished, the boot check
  included), the host pauses the VM, moves its writes to the instance's own overlay (QMP
  ``blockdev-snapshot-sync``: ``disk.qcow2`` stays behind as the disk was at that moment),
  saves the VM's state to ``state`` (QMP ``migrate`` to a file, published by rename once
  complete) and lets the VM go on: it is the first instance.
- every later VM of that shape starts from an overlay of ``disk.qcow2`` with ``-incoming``
  from ``state``, and goes on from where the saved VM waited.

Either way the host then hands over on the guest's virtio-serial port (``HANDOVER_PORT``,
the transport qemu-guest-agent uses; an emulated UART's transmitter can stall across the
save, see ``guest_setup``): the clock (a
restored VM's clock stood still while saved) and the instance's logins, as a cloud's guest
agent gets them from its metadata; the guest makes its own SSH host key (when the saved
boot made the one it has: a key the image carries is left for the hygiene check), installs
the logins and says it is done. ``hand_over`` is that host side; the caller's wait for SSH
comes after it.

A restored instance shares with the saved boot what a boot makes once: its journal, boot
id and machine-id, and the boot check's receipt of that boot. A state that fails to load
(QEMU exits during ``-incoming``) is removed by ``discard``, so the next VM boots.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from imagectl.clouds.local import pids
from imagectl.clouds.local.guest_setup import HANDOVER_DONE, HANDOVER_READY
from imagectl.clouds.local.qemu import VmSpec
from imagectl.clouds.local.qmp import Qmp, QmpError
from imagectl.core.sockets import fits, socket_base

FORMAT = 2  # of the folder and the hand-over; a change makes new keys
STALE_CLAIM_S = 10 * 60  # a claim this old that names no VM: its saver is gone
DEVICE = "virtio0"  # the -drive if=virtio disk, as QMP names it
# Once the hand-over is sent, the guest answers within this (it sets the clock, maybe makes
# a host key, adds the logins: seconds under TCG) or asks again; silence is an error, not
# a wait to the end of the reach timeout (a stalled port once cost 10 minutes).
DONE_WITHIN_S = 60.0


class HandoverError(RuntimeError):
    """The guest's hand-over did not happen (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Handover:
    """The host's end of a saved boot's VM (kept in a local instance's record)."""

    mode: Literal["save", "restore"]
    folder: Path  # the saved boot: disk.qcow2, state
    overlay: Path  # the instance's own disk (save: QEMU makes it at the save)
    qmp: Path
    serial: Path

    def to_json(self) -> dict[str, str]:
        return {k: str(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> Handover:
        mode: Literal["save", "restore"] = "save" if raw.get("mode") == "save" else "restore"
        return cls(
            mode, Path(str(raw["folder"])), Path(str(raw["overlay"])), Path(str(raw["qmp"])),
            Path(str(raw["serial"])),
        )  # fmt: skip


@functools.lru_cache(maxsize=1)
def _qemu_version() -> str:
    done = subprocess.run(
        ["qemu-system-x86_64", "--version"], capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.stdout.splitlines()[0] if done.stdout else ""


def boots_folder(image: Path) -> Path:
    """Where an image's saved boots live: beside it (removed with it)."""
    return image.with_name(image.name + ".boots")


def key(spec: VmSpec, image: Path) -> str:
    """The saved boot's name: the shape, QEMU's version and the image file's identity
    (its inode: a hard link of it in another registry is the same image)."""
    st = image.stat()
    shape = {
        "format": FORMAT,
        "qemu": _qemu_version(),
        "image": [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns],
        **spec.shape(),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:20]


def socket_dir(folder: Path) -> Path:
    """``folder`` when its sockets' paths fit a unix socket address (108 bytes), else a
    short folder named after it under the temporary directory (or /tmp where even that
    is too long: ``imagectl.core.sockets``)."""
    if fits(folder / "serial.sock"):
        return folder
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:16]
    name = f"imagectl-vm-{digest}"
    return Path(socket_base(len(f"{name}/serial.sock"))) / name


def prepare(
    spec: VmSpec, *, image: Path, overlay: Path, sockets: Path
) -> tuple[Path, Handover | None]:
    """Set ``spec`` up to start from ``image``'s saved boot of its shape, or to make it.
    Returns what the caller makes ``spec.disk`` an overlay of, and the hand-over to run
    once QEMU is started (None: a plain boot from an overlay of the image)."""
    if spec.extra_args:  # a second NIC and the like: the guest is not one of a shape
        return image, None
    image, overlay = image.resolve(), overlay.resolve()
    folder = boots_folder(image) / key(spec, image)
    sockets.mkdir(parents=True, exist_ok=True)
    control = (sockets / "qmp.sock", sockets / "serial.sock")
    for path in control:
        path.unlink(missing_ok=True)
    if (folder / "state").is_file() and (folder / "disk.qcow2").is_file():
        spec.disk, spec.control, spec.handover = overlay, control, True
        spec.incoming = folder / "state"
        return folder / "disk.qcow2", Handover("restore", folder, overlay, *control)
    if not _claim(folder):
        return image, None
    spec.disk, spec.control, spec.handover = folder / "disk.qcow2", control, True
    return image, Handover("save", folder, overlay, *control)


def _claim(folder: Path) -> bool:
    """Take the shape's folder to save into; a claim whose VM is gone (killed before its
    save, or it never started) is taken over."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.is_dir() and not (folder / "state").is_file() and _abandoned(folder):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        folder.mkdir()
    except OSError:
        return False
    return True


def own(handover: Handover, pid: int) -> None:
    """Name the VM that saves (``pid``, with its start time): once it is gone without a
    state, the claim is abandoned."""
    if handover.mode == "save":
        (handover.folder / "owner").write_text(f"{pid} {pids.start_time(pid) or '-'}\n")


def _abandoned(folder: Path) -> bool:
    try:
        pid, started = (folder / "owner").read_text().split()
    except (OSError, ValueError):  # no VM named yet: abandoned once it is old
        try:
            return time.time() - folder.stat().st_mtime > STALE_CLAIM_S
        except OSError:
            return False
    return not pids.alive(int(pid), started)


def discard(handover: Handover) -> None:
    """The saved boot is not to be used again (its state failed to load or to save)."""
    shutil.rmtree(handover.folder, ignore_errors=True)


# a restored guest says READY every second; silence this long is a port it never saw open
RECONNECT_S = 15.0


def hand_over(
    handover: Handover,
    logins: Iterable[tuple[str, str]],
    *,
    alive: Callable[[], bool],
    timeout_s: float,
    done_within_s: float = DONE_WITHIN_S,
    reconnect_s: float = RECONNECT_S,
) -> None:
    """The host's side (see the module docstring): after it, the instance's logins are
    installed and its SSH server has its own host key. ``HandoverError`` when the VM
    stops, the guest never says it is ready, says nothing within ``done_within_s`` of
    being sent the hand-over, or the time runs out. A restored guest silent for
    ``reconnect_s`` after the connection is connected to again."""
    deadline = time.monotonic() + timeout_s
    login_lines = [f"login {user} {key_.strip()}" for user, key_ in logins]
    if handover.mode == "restore":
        _resume(handover, alive, deadline)
    conn = _connect(handover.serial, alive, deadline)
    try:
        lines = _Lines(conn)
        while True:
            # A restored guest whose READY writes stay blocked is connected to again: a new
            # connection is a new port-open event for its virtio-serial port. Seen on
            # QEMU 7.2 (Debian 12), TCG, once in five e2e runs: the VM running, the host
            # connected, nothing said for ten minutes; a second connection got READY at once.
            wait_until = deadline if handover.mode == "save" else min(
                deadline, time.monotonic() + reconnect_s
            )  # fmt: skip
            try:
                _await(lines, (HANDOVER_READY,), alive, wait_until)
                break
            except HandoverError:
                if wait_until >= deadline or not alive():
                    raise
            with contextlib.suppress(OSError):
                conn.close()
            conn = _connect(handover.serial, alive, deadline)
            lines = _Lines(conn)
        if handover.mode == "save":
            _save(handover, max(deadline - time.monotonic(), 60.0))
        lines.drain()  # readies said before now: not requests to send again
        message = "\n".join([f"clock {time.time():.3f}", *login_lines, "end"]) + "\n"
        try:
            conn.sendall(message.encode())
        except OSError as exc:
            raise HandoverError(f"the hand-over connection broke: {exc}") from exc
        while True:
            answer_by = min(deadline, time.monotonic() + done_within_s)
            try:
                said = _await(lines, (HANDOVER_DONE, HANDOVER_READY), alive, answer_by)
            except HandoverError as exc:
                # only silence is a stall (a closed port or a stopped VM says so itself)
                if answer_by < deadline and time.monotonic() >= answer_by and alive():
                    raise HandoverError(
                        f"the guest was sent its hand-over and said nothing for "
                        f"{done_within_s:g} s (neither {HANDOVER_DONE} nor a new "
                        f"{HANDOVER_READY}): its hand-over port stalled"
                    ) from exc
                raise
            if said == HANDOVER_DONE:
                return
            with contextlib.suppress(OSError):  # the guest lost a line: it asks again
                conn.sendall(message.encode())
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def _resume(handover: Handover, alive: Callable[[], bool], deadline: float) -> None:
    """Wait for the state to load; the saved VM was paused, so this one starts paused."""
    if not alive():
        raise HandoverError("QEMU exited loading the saved state")
    try:
        with Qmp(handover.qmp, timeout_s=max(deadline - time.monotonic(), 1.0)) as qmp:
            while True:
                status = qmp.cmd("query-status").get("status")
                if status == "paused":
                    qmp.cmd("cont")
                    return
                if status == "running":
                    return
                if status not in ("inmigrate", "prelaunch"):
                    raise HandoverError(f"the saved state did not load (QEMU: {status})")
                if time.monotonic() >= deadline:
                    raise HandoverError("the saved state did not load in time")
                time.sleep(0.05)
    except QmpError as exc:
        if not alive():
            raise HandoverError(f"QEMU exited loading the saved state ({exc})") from exc
        raise HandoverError(f"the restored VM does not answer: {exc}") from exc


def _connect(path: Path, alive: Callable[[], bool], deadline: float) -> socket.socket:
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            sock.settimeout(1.0)
            return sock
        except OSError as exc:
            sock.close()
            if not alive():
                raise HandoverError("the VM stopped before its hand-over") from exc
            if time.monotonic() >= deadline:
                raise HandoverError(f"no hand-over socket at {path}") from exc
            time.sleep(0.2)


class _Lines:
    """The guest's lines on the hand-over socket (a timeout keeps what came so far)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buffer = sock, b""

    def next(self) -> str | None:
        """A line; None when none came within the socket's timeout."""
        while b"\n" not in self.buffer:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                return None
            except OSError as exc:
                raise HandoverError(f"the hand-over connection broke: {exc}") from exc
            if not data:
                raise HandoverError("the VM closed its hand-over port")
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def drain(self) -> None:
        """Forget what came so far (readies said before the host's lines went)."""
        self.buffer = b""
        self.sock.setblocking(False)
        try:
            while self.sock.recv(4096):
                pass
        except OSError:  # nothing more waiting (a broken connection shows at the next read)
            pass
        finally:
            self.sock.settimeout(1.0)


def _await(
    lines: _Lines, wanted: tuple[str, ...], alive: Callable[[], bool], deadline: float
) -> str:
    while True:
        line = lines.next()
        if line in wanted:
            return line
        if line is None and not alive():
            raise HandoverError("the VM stopped before its hand-over")
        if time.monotonic() >= deadline:
            raise HandoverError(f"the guest never said {' or '.join(wanted)}")


def _save(handover: Handover, timeout_s: float) -> None:
    """Pause, move the VM's writes to its own overlay, save the state, go on. A failed
    save leaves the VM running and the saved boot discarded."""
    folder = handover.folder
    partial = folder / "state.partial"
    with Qmp(handover.qmp, timeout_s=timeout_s) as qmp:
        qmp.cmd("stop")
        try:
            qmp.cmd(
                "blockdev-snapshot-sync", device=DEVICE, format="qcow2",
                **{"snapshot-file": str(handover.overlay)},
            )  # fmt: skip
            qmp.cmd("migrate", uri=f"exec:cat > {shlex.quote(str(partial))}")
            deadline = time.monotonic() + timeout_s
            while True:
                status = qmp.cmd("query-migrate").get("status")
                if status == "completed":
                    break
                if status in ("failed", "cancelled") or time.monotonic() >= deadline:
                    raise QmpError(f"saving the state: {status}")
                time.sleep(0.05)
            os.replace(partial, folder / "state")
        except (QmpError, OSError):
            # not to be restored from; a VM still on disk.qcow2 keeps its open file
            discard(handover)
        finally:
            qmp.cmd("cont")
