"""Emulated instances that boot: a QEMU guest per instance, reachable only as the cloud's
network rules admit.

The cloud emulators (moto with ``tests/fakes/moto_guests.py``, ``FakeGcpCompute``,
``FakeAzureArm``) share one ``GuestHost`` when a test gives them one; without it they
behave as before (instances that never boot). The host is given a guest image (the local
candidate: a qcow2 disk and the kernel and initrd it boots with) and, per instance:

- ``reserve_address(owner)``: the instance's public IP, ``127.0.0.N`` (N unique; all of
  127/8 is this machine's loopback on Linux, so nothing has to be configured). Azure
  allocates it with the public IP resource, before the VM exists; the other clouds take
  one in ``boot``.
- ``boot(instance_id, logins=[(user, public_key)], admits=callable(peer_ip) -> bool,
  address=None) -> public_ip``: a fresh qcow2 overlay on the disk (the candidate is never
  written), QEMU started from the image's saved boot (``imagectl.clouds.local.saved_boot``,
  shared with the local cloud's instances of the image: the first VM of the shape saves
  it) with the logins handed to the guest over its hand-over port by a thread of the
  host (the image's ``imagectl-handover`` unit creates each user and installs its key, as
  a cloud's guest agent does from the cloud's own metadata; a guest with a private NIC
  boots instead, its logins through fw_cfg ``opt/imagectl/login``), QEMU's
  hostfwd for guest port 22 on ``127.0.0.1:<free port>``, and a TCP forwarder on
  ``public_ip:22``. For each connection the forwarder asks ``admits(peer_ip)`` against
  the cloud's *current* rules (a rule revoked later closes later connections) and
  forwards to the guest, or closes the connection at once. ``boot`` returns as soon as
  QEMU is started, as a cloud reports an instance running before its SSH answers.
- ``stop(instance_id)``: the VM, its forwarder and its overlay go; ``close()`` stops all
  (fixtures call it: no VM outlives a test).
- the VPC between instances: ``boot(..., private_address=IP)`` gives the guest a second
  NIC on a network only this host's guests share (QEMU's ``-netdev socket,mcast=``: a hub
  on a multicast group of the loopback, one group per host), at PCI slot 16 (the guest
  names it ``ens16``, as it names the first ``ens2``) with ``IP/24`` set by the kernel
  command line's ``ip=`` (systemd-network-generator writes its .network file), the way a
  cloud's DHCP gives an instance its private IP. Guests reach each other there (a
  multi-node run's collectives), never through the forwarders. ``GuestHost(vpc=False)``
  leaves that network out (a test whose runs have one node): every guest then starts
  from the saved boot.

QEMU is started from one long-lived thread of the host, never from a request thread:
``Children`` gives each child a parent-death signal, which Linux sends when the *thread*
that forked it ends (prctl(2), PR_SET_PDEATHSIG), and the fakes answer every HTTP request
on a thread of its own.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ipaddress
import json
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.clouds.local import saved_boot
from imagectl.clouds.local.qemu import TCG_CPU, VmSpec, free_port
from imagectl.embedded import disk
from imagectl.embedded.procs import Children

Admits = Callable[[str], bool]
SSH_PORT = 22
VPC_SLOT = 16  # the private NIC's PCI slot: the guest names it ens16 (the first is ens2)
VPC_NIC = f"ens{VPC_SLOT}"


@dataclass(frozen=True)
class GuestImage:
    """What every emulated instance boots: the disk (read-only, overlays only) and the
    kernel and initrd of its direct kernel boot."""

    disk: Path
    kernel: Path
    initrd: Path
    # the local image the disk is (its registry record's id): the guests' fw_cfg names it
    # as the local cloud's instances' does, so they share its saved boot (same shape)
    image_id: str = ""


def find_guest_image(state: Path) -> GuestImage | None:
    """The newest promoted (else newest) local candidate under an ``imagectl run --stack
    local`` state folder:
    ``registry/<region>/images/<hex>.qcow2`` with the kernel and initrd its ``.json``
    names (``boot``), else with the newest base's (``local/base/<key>/vmlinuz``,
    ``initrd.img``); None when there is no complete set."""
    disks = sorted((state / "registry").glob("*/images/*.qcow2"), key=lambda p: p.stat().st_mtime)
    # a promoted image first (what a stack's pointer names): the newest file may be a
    # blocked fault copy or a build that another test is still making
    promoted = {
        p.read_text().strip().split(":")[-1]
        for p in (state / "registry").glob("*/stacks/*/latest")
        if p.is_file()
    }
    disks.sort(key=lambda p: p.stem in promoted)
    bases = [
        p
        for p in (state / "local" / "base").glob("*")
        if (p / "vmlinuz").is_file() and (p / "initrd.img").is_file()
    ]
    base = max(bases, key=lambda p: p.stat().st_mtime) if bases else None
    for disk_path in reversed(disks):
        try:
            record = json.loads(disk_path.with_suffix(".json").read_text())
        except (OSError, ValueError):
            record = {}
        boot, image_id = record.get("boot") or {}, str(record.get("image_id") or "")
        kernel, initrd = Path(boot.get("kernel", "-")), Path(boot.get("initrd", "-"))
        if kernel.is_file() and initrd.is_file():
            return GuestImage(disk_path, kernel, initrd, image_id)
        if base is not None:
            return GuestImage(disk_path, base / "vmlinuz", base / "initrd.img", image_id)
    return None


class _Forwarder:
    """``address:port`` -> ``127.0.0.1:target``, each connection judged by ``admits``."""

    def __init__(self, address: str, port: int, target: int, admits: Admits) -> None:
        self.address, self.port, self.target, self.admits = address, port, target, admits
        self.refused: list[str] = []  # peers closed at once (tests read it)
        self.admitted: list[str] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((address, port))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(
            target=self._serve, name=f"guest-forwarder-{address}", daemon=True
        )
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, (peer, _port) = self._sock.accept()
            except OSError:
                return
            try:
                allowed = bool(self.admits(peer))
            except Exception:  # the cloud's state is gone (fake stopped): nothing admits
                allowed = False
            if not allowed:
                self.refused.append(peer)
                _abort(conn)
                continue
            self.admitted.append(peer)
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
        except OSError:
            _abort(conn)
            return
        upstream.settimeout(None)
        with self._lock:
            self._open |= {conn, upstream}
        pump = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
        pump.start()
        _pump(conn, upstream)
        pump.join()
        with self._lock:
            self._open -= {conn, upstream}
        for s in (conn, upstream):
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            live = list(self._open)
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)


def _abort(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


@dataclass
class Guest:
    """One booted instance."""

    instance_id: str
    address: str
    ssh_port: int  # QEMU's hostfwd on 127.0.0.1 (the forwarder's target)
    logins: list[tuple[str, str]]
    overlay: Path
    serial_log: Path
    proc: Any  # the VM's process (subprocess.Popen)
    forwarder: _Forwarder
    started: float = field(default_factory=time.monotonic)
    # a saved boot's VM (imagectl.clouds.local.saved_boot): "save" or "restore", and what
    # its hand-over thread ended with (None while it runs or when it worked)
    saved_boot: str | None = None
    handover_error: str | None = None

    def running(self) -> bool:
        return self.proc.poll() is None

    def serial_tail(self, lines: int = 20) -> str:
        if not self.serial_log.exists():
            return ""
        return "\n".join(self.serial_log.read_text(errors="replace").splitlines()[-lines:])


class GuestHost:
    """Boots and stops the emulated clouds' instances (see the module docstring)."""

    def __init__(
        self,
        image: GuestImage,
        workdir: Path,
        *,
        accel: str = "tcg",
        memory_mib: int = 2048,
        cpus: int = 2,
        port: int = SSH_PORT,
        tcg_cpu: str = TCG_CPU,
        saved_boots: bool = True,
        vpc: bool = True,
    ) -> None:
        self.image = image
        # the private network between guests (False: a guest gets no private NIC, so it
        # starts from the saved boot; for tests whose runs need no second node)
        self.vpc = vpc
        # guests start from the image's saved boot (imagectl.clouds.local.saved_boot, as
        # the local cloud's instances do): the first saves it, the next restore it
        self.saved_boots = saved_boots
        self.handover_timeout_s = 600.0
        self.tcg_cpu = tcg_cpu  # the guests' -cpu under TCG (TORCH_CPU where torch runs)
        self.workdir = workdir
        self.accel = accel
        self.memory_mib = memory_mib
        self.cpus = cpus
        # where the public addresses listen: 22 as on a cloud (root); 0: any free port
        # (tests that need no root read it from ``Guest.forwarder.port``)
        self.port = port
        self.guests: dict[str, Guest] = {}
        self.history: list[str] = []  # every instance id ever booted, in order
        self._addresses: dict[str, str] = {}  # address -> owner
        self._next = 2  # 127.0.0.1 is the runner's own address
        self._lock = threading.RLock()
        self._children = Children(grace_s=3)
        self._private: dict[str, str | None] = {}  # instance id -> its private address
        # the guests' private network: one multicast group and port per host
        self.vpc_group = (f"230.0.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 1}",
                    _free_udp_port())  # fmt: skip
        # One thread starts every QEMU (see the module docstring: parent-death signal).
        self._starter = concurrent.futures.ThreadPoolExecutor(1, "guest-host")
        workdir.mkdir(parents=True, exist_ok=True)

    # -- addresses -------------------------------------------------------------------
    def reserve_address(self, owner: str) -> str:
        """A public IP of its own for ``owner`` (127.0.0.N, never handed out twice)."""
        with self._lock:
            while True:
                n, self._next = self._next, self._next + 1
                address = str(ipaddress.IPv4Address("127.0.0.0") + n)
                if n % 256 in (0, 255) or address in self._addresses:
                    continue
                if self.port and not _free(address, self.port):
                    continue  # another process (or session) serves that address
                self._addresses[address] = owner
                return address

    def release_address(self, address: str) -> None:
        with self._lock:
            if not any(g.address == address for g in self.guests.values()):
                self._addresses.pop(address, None)

    # -- instances -------------------------------------------------------------------
    def boot(
        self,
        instance_id: str,
        *,
        logins: Iterable[tuple[str, str]],
        admits: Admits,
        address: str | None = None,
        private_address: str | None = None,
    ) -> str:
        """Start ``instance_id``'s VM; return its public IP at once (SSH comes later).
        ``private_address``: its IP on the guests' private network (none: no such NIC)."""
        logins = [(u, k.strip()) for u, k in logins if u and k and k.strip()]
        with self._lock:
            if instance_id in self.guests:
                return self.guests[instance_id].address
            address = address or self.reserve_address(instance_id)
            self._addresses[address] = instance_id
        guest = self._starter.submit(
            self._start, instance_id, logins, admits, address, private_address
        ).result()
        with self._lock:
            self.guests[instance_id] = guest
            self.history.append(instance_id)
        return address

    def _start(
        self,
        instance_id: str,
        logins: list[tuple[str, str]],
        admits: Admits,
        address: str,
        private_address: str | None = None,
    ) -> Guest:
        stem = self.workdir / _safe(instance_id)
        login_file = stem.with_suffix(".login")
        # "USER KEY" lines, each ending in a newline (the unit reads them with `read`)
        login_file.write_text("".join(f"{u} {k}\n" for u, k in logins), encoding="utf-8")
        overlay = stem.with_suffix(".qcow2")
        serial = stem.with_suffix(".serial.log")
        self._private[instance_id] = private_address if self.vpc else None
        proc, ssh_port, handover = self._launch(instance_id, overlay, login_file, serial)
        try:
            forwarder = _Forwarder(address, self.port, ssh_port, admits)
        except OSError:
            self._halt(proc)
            raise
        guest = Guest(instance_id, address, ssh_port, logins, overlay, serial, proc, forwarder)
        if handover is not None:
            guest.saved_boot = handover.mode
            threading.Thread(
                target=self._hand_over, args=(guest, handover), daemon=True,
                name=f"guest-handover-{instance_id}",
            ).start()  # fmt: skip
        return guest

    def _hand_over(self, guest: Guest, handover: saved_boot.Handover) -> None:
        """What the cloud's guest agent does at first boot (the logins), on a saved boot's
        VM; its failure stays on the guest (the test's SSH never answers)."""
        try:
            saved_boot.hand_over(
                handover, guest.logins, alive=guest.running, timeout_s=self.handover_timeout_s
            )
        except saved_boot.HandoverError as exc:
            guest.handover_error = str(exc)
            if handover.mode == "restore" and not guest.running():
                saved_boot.discard(handover)

    def _launch(
        self, instance_id: str, overlay: Path, login_file: Path, serial: Path
    ) -> tuple[Any, int, saved_boot.Handover | None]:
        """Start the VM (on the starter thread): its process, its hostfwd port and the
        hand-over to run when it starts from (or makes) a saved boot."""
        spec = VmSpec(
            disk=overlay,
            kernel=self.image.kernel,
            initrd=self.image.initrd,
            accel=self.accel,
            memory_mib=self.memory_mib,
            cpus=self.cpus,
            ssh_port=free_port(),
            host_address="127.0.0.1",
            serial_log=serial,
            name=f"imagectl-guest-{_safe(instance_id)}",
            tcg_cpu=self.tcg_cpu,
            image_id=self.image.image_id,
        )
        private_address = self._private.get(instance_id)
        backing, handover = self.image.disk, None
        if self.saved_boots and not private_address:
            backing, handover = saved_boot.prepare(
                spec, image=self.image.disk, overlay=overlay,
                sockets=saved_boot.socket_dir(overlay.with_suffix(".control")),
            )  # fmt: skip
        if handover is None:
            spec.logins = login_file
        disk.overlay(self._children, backing, spec.disk)
        if private_address:
            spec.append += f" ip={private_address}:::255.255.255.0::{VPC_NIC}:none"
            group, port = self.vpc_group
            spec.extra_args += [
                "-netdev", f"socket,id=vpc,mcast={group}:{port},localaddr=127.0.0.1",
                "-device", f"virtio-net-pci,netdev=vpc,addr=0x{VPC_SLOT:x},"
                f"mac={_mac(private_address)}",
            ]  # fmt: skip
        with serial.with_suffix(".qemu.log").open("ab") as out:
            proc = self._children.popen(
                spec.argv(), name=f"qemu {instance_id}", stdout=out, stderr=subprocess.STDOUT
            )
        if handover:
            saved_boot.own(handover, proc.pid)
        return proc, spec.ssh_port, handover

    def _halt(self, proc: Any) -> None:
        self._children.stop(proc, grace_s=1)

    def stop(self, instance_id: str) -> None:
        """The instance is gone: its VM, forwarder and overlay (nothing if unknown)."""
        with self._lock:
            guest = self.guests.pop(instance_id, None)
        if guest is None:
            return
        guest.forwarder.close()
        self._halt(guest.proc)
        for path in (guest.overlay, guest.overlay.with_suffix(".login")):
            path.unlink(missing_ok=True)
        shutil.rmtree(saved_boot.socket_dir(guest.overlay.with_suffix(".control")), True)
        with self._lock:
            if self._addresses.get(guest.address) == instance_id:
                self._addresses.pop(guest.address)

    def close(self) -> None:
        """Stop every guest; the host cannot boot afterwards."""
        for instance_id in list(self.guests):
            self.stop(instance_id)
        self._children.stop_all()
        self._starter.shutdown(wait=True)

    def __enter__(self) -> GuestHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------
    def guest(self, instance_id: str) -> Guest | None:
        with self._lock:
            return self.guests.get(instance_id)

    def by_address(self, address: str) -> Guest | None:
        with self._lock:
            return next((g for g in self.guests.values() if g.address == address), None)

    def wait_sshd(self, instance_id: str, timeout: float = 300) -> float:
        """Seconds until the guest's sshd sends its banner on the hostfwd port (bypassing
        the cloud's rules: the test's own view that the guest is up)."""
        guest = self.guests[instance_id]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not guest.running():
                raise RuntimeError(f"{instance_id}: QEMU exited\n{guest.serial_tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", guest.ssh_port), timeout=5) as s,
            ):
                s.settimeout(10)
                if s.recv(64).startswith(b"SSH-"):
                    return time.monotonic() - guest.started
            time.sleep(1)
        raise TimeoutError(
            f"{instance_id}: no SSH banner after {timeout:.0f} s\n{guest.serial_tail()}"
        )


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mac(address: str) -> str:
    """A locally administered MAC from the private IP (unique on the host's network)."""
    a, b, c, d = (int(x) for x in address.split("."))
    return f"52:54:{a:02x}:{b:02x}:{c:02x}:{d:02x}"


def _free(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[-80:]


def cidr_admits(cidr: str | None, peer: str) -> bool:
    """Does a source range (CIDR or single address; ``*``/``Internet``/``Any`` as Azure
    spells everything) contain ``peer``?"""
    if not cidr:
        return False
    if cidr.strip().lower() in ("*", "internet", "any"):
        return True
    try:
        return ipaddress.ip_address(peer) in ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return False


def port_in(spec: Any, port: int = SSH_PORT) -> bool:
    """Does a port spec (``22``, ``"22"``, ``"20-25"``, ``"*"``) contain ``port``?"""
    text = str(spec).strip()
    if text == "*":
        return True
    low, _, high = text.partition("-")
    try:
        return int(low) <= port <= int(high or low)
    except ValueError:
        return False
