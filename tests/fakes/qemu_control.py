"""A saved boot's VM as the host sees it: QEMU's QMP socket and the guest's hand-over port.

The two unix sockets a ``VmSpec`` with ``control`` gives (``imagectl.clouds.local.qemu``),
served the way QEMU 7.2 and the image's ``imagectl-handover`` serve them:

- QMP (docs/interop/qmp-spec.txt): the greeting, ``qmp_capabilities`` first, one reply
  per command, errors as ``{"error": {"class", "desc"}}``, events in between. ``stop``,
  ``cont``, ``query-status`` (``inmigrate`` while a state loads, then ``paused``: the
  saved VM was paused), ``blockdev-snapshot-sync`` (device ``virtio0`` only; the new
  file must not exist; QEMU creates it), ``migrate`` (asynchronous: ``exec:CMD`` runs
  CMD through /bin/sh with the state on its standard input; ``query-migrate`` says
  ``active`` before ``completed``) and ``quit``.
- the hand-over port (the guest's virtio-serial port, a chardev socket with ``wait=off``;
  what the guest says while no host is connected is lost here, where the real port's
  writes wait for the host: stricter): while the VM runs, the guest says
  ``imagectl-handover-ready`` every ``ready_every_s`` until it has read a hand-over
  ending in ``end``, then ``imagectl-handover-done``. A paused VM says and reads nothing.

``lose_first`` drops the first hand-over (as a line lost at the guest's read timeout).
``mute_after_save`` is the stall seen on a 16550 UART (the guest's ttyS1, before the port
was virtio-serial): once the VM was saved, the guest still reads and acts on its
hand-over, but nothing it says reaches the host.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from imagectl.clouds.local.guest_setup import HANDOVER_DONE, HANDOVER_READY


class FakeVm:
    def __init__(
        self,
        qmp: Path,
        serial: Path,
        *,
        incoming: bool = False,
        migrate_fails: bool = False,
        lose_first: bool = False,
        mute_after_save: bool = False,
        ready_every_s: float = 0.05,
        deaf_first: bool = False,
    ) -> None:
        self.status = "inmigrate" if incoming else "running"
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self.received: list[str] = []  # the hand-over lines the guest read
        self.handovers = 0
        self.migrate_fails = migrate_fails
        self.lose_first = lose_first
        self.mute_after_save = mute_after_save
        self._saved = False
        self.ready_every_s = ready_every_s
        # the restored guest that never saw its port open: nothing on the first connection
        # (QEMU 7.2 under TCG, once in five e2e runs), READY on the next one
        self.deaf_first = deaf_first
        self.connections = 0
        self.alive = True
        self._migration = "none"
        self._lock = threading.Lock()
        self._servers = [_listen(qmp), _listen(serial)]
        self._threads = [
            threading.Thread(target=self._serve_qmp, daemon=True),
            threading.Thread(target=self._serve_guest, daemon=True),
        ]
        for t in self._threads:
            t.start()
        if incoming:  # the state loads asynchronously
            threading.Timer(0.2, self._loaded).start()

    def _loaded(self) -> None:
        with self._lock:
            if self.status == "inmigrate":
                self.status = "paused"

    def die(self) -> None:
        self.alive = False
        self.close()

    def close(self) -> None:
        """QEMU is gone: its sockets refuse connections (the files stay, as QEMU's do
        after a SIGKILL)."""
        for s in self._servers:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # wakes the accept()
            with contextlib.suppress(OSError):
                s.close()

    # -- QMP -----------------------------------------------------------------------------
    def _serve_qmp(self) -> None:
        server = self._servers[0]
        while self.alive:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rw") as f:
                f.write(json.dumps({"QMP": {"version": {}, "capabilities": []}}) + "\n")
                f.flush()
                ready = False
                for line in f:
                    msg = json.loads(line)
                    name, args = msg["execute"], msg.get("arguments", {})
                    if not ready and name != "qmp_capabilities":
                        reply: dict[str, Any] = _error("CommandNotFound", "capabilities first")
                    else:
                        ready = True
                        reply = self._run(name, args)
                    f.write(json.dumps({"event": "NOISE", "data": {}}) + "\n")
                    f.write(json.dumps(reply) + "\n")
                    f.flush()

    def _run(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.commands.append((name, args))
            if name == "qmp_capabilities":
                return {"return": {}}
            if name == "query-status":
                return {"return": {"status": self.status, "running": self.status == "running"}}
            if name == "stop":
                self.status = "paused"
                return {"return": {}}
            if name == "cont":
                if self.status == "inmigrate":
                    return _error("GenericError", "migration is not finished")
                self.status = "running"
                return {"return": {}}
            if name == "blockdev-snapshot-sync":
                target = Path(args["snapshot-file"])
                if args.get("device") != "virtio0":
                    return _error("DeviceNotFound", f"Device '{args.get('device')}' not found")
                if target.exists():
                    return _error("GenericError", f"Could not create '{target}': exists")
                target.write_bytes(b"QFI\xfb")
                return {"return": {}}
            if name == "migrate":
                self._saved = True
                uri = args["uri"]
                if not uri.startswith("exec:"):
                    return _error("GenericError", f"unknown migration protocol: {uri}")
                self._migration = "active"
                threading.Thread(target=self._migrate, args=(uri[5:],), daemon=True).start()
                return {"return": {}}
            if name == "query-migrate":
                return {"return": {"status": self._migration}}
            return _error("CommandNotFound", f"The command {name} has not been found")

    def _migrate(self, command: str) -> None:
        time.sleep(0.1)
        if self.migrate_fails:
            with self._lock:
                self._migration = "failed"
            return
        subprocess.run(["/bin/sh", "-c", command], input=b"QEVM\x00\x00\x00\x03saved", check=True)
        with self._lock:
            self._migration = "completed"

    # -- the guest's hand-over port --------------------------------------------------------
    def _serve_guest(self) -> None:
        server = self._servers[1]
        while self.alive:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                if self.deaf_first and self.connections == 1:
                    with contextlib.suppress(OSError):
                        while self.alive and conn.recv(4096):
                            pass
                    continue
                self._guest(conn)

    def _guest(self, conn: socket.socket) -> None:
        conn.settimeout(self.ready_every_s)
        buffer, said_ready = b"", False
        while self.alive:
            if self.status != "running":
                time.sleep(0.01)
                continue
            muted = self.mute_after_save and self._saved
            if (not said_ready or b"\n" not in buffer) and not muted:
                with contextlib.suppress(OSError):
                    conn.sendall(f"{HANDOVER_READY}\n".encode())
                said_ready = True
            try:
                data = conn.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            buffer += data
            while b"end\n" in buffer:
                message, _, buffer = buffer.partition(b"end\n")
                self.handovers += 1
                if self.lose_first and self.handovers == 1:
                    continue  # lost: the guest asks again
                self.received = message.decode().splitlines()
                if muted:  # read and acted on, but its answer never leaves the port
                    while self.alive:
                        time.sleep(0.05)
                    return
                conn.sendall(f"{HANDOVER_DONE}\n".encode())
                return


def _listen(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(1)
    return s


def _error(cls: str, desc: str) -> dict[str, Any]:
    return {"error": {"class": cls, "desc": desc}}
