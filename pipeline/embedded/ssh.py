"""SSH to a local VM with the system ``ssh``/``scp`` and a key generated for this run.

Host keys are not checked (every boot of a candidate makes a new one and the address is
a forwarded localhost port) and nothing is written to the user's known_hosts.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from imagectl.embedded.procs import ChildFailed, Children
from imagectl.fsutil import private_dir


def generate_key(folder: Path, name: str = "id_ed25519", comment: str = "imagectl-run") -> Path:
    """A fresh ed25519 key pair in ``folder`` (made 0700; ssh-keygen writes the private key
    0600); returns the private key's path. The caller removes the folder when done."""
    private_dir(folder)
    key = folder / name
    for p in (key, key.with_suffix(".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return key


@dataclass
class Ssh:
    children: Children
    key: Path
    port: int
    user: str = "root"
    host: str = "127.0.0.1"

    def options(self) -> list[str]:
        return [
            "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes",
            "-o", "ConnectTimeout=10",
            "-o", "ServerAliveInterval=15",
            "-i", str(self.key),
        ]  # fmt: skip

    def run(self, command: str, *, timeout: float = 120, check: bool = True) -> str:
        argv = ["ssh", *self.options(), "-p", str(self.port), f"{self.user}@{self.host}", command]
        return self.children.run(argv, name="ssh", timeout=timeout, check=check)

    def try_run(self, command: str, *, timeout: float = 30) -> tuple[int, str]:
        try:
            return 0, self.run(command, timeout=timeout)
        except ChildFailed as exc:
            return exc.code, exc.tail

    def put(self, local: Path, remote: str, *, timeout: float = 120) -> None:
        argv = ["scp", *self.options(), "-P", str(self.port), str(local),
                f"{self.user}@{self.host}:{remote}"]  # fmt: skip
        self.children.run(argv, name="scp", timeout=timeout)

    def get(self, remote: str, local: Path, *, timeout: float = 120) -> None:
        argv = ["scp", *self.options(), "-P", str(self.port),
                f"{self.user}@{self.host}:{remote}", str(local)]  # fmt: skip
        self.children.run(argv, name="scp", timeout=timeout)

    def wait_ready(self, *, timeout: float, alive: object = None, interval: float = 2.0) -> float:
        """Poll ``ssh true`` until it answers; returns the seconds waited.

        ``alive`` is a callable returning False when the VM died (stop waiting early).
        """
        start = time.monotonic()
        last = ""
        while time.monotonic() - start < timeout:
            if callable(alive) and not alive():
                raise ChildFailed("qemu", [], -1, f"the VM stopped before SSH answered. {last}")
            code, out = self.try_run("true", timeout=20)
            if code == 0:
                return time.monotonic() - start
            last = out.strip()[-200:]
            time.sleep(interval)
        raise ChildFailed("ssh", [], -1, f"no SSH answer within {timeout:g} s: {last}")
