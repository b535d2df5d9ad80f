"""Demonstration faults: a built candidate is altered the way a bad build would leave it.

``--inject-fault`` exists to show that validation blocks a bad image instead of promoting
it. The fault is written into a copy of the candidate's disk with ``debugfs`` (no loop
mount, no boot), so the faulty image has its own content address and the good
candidate is untouched:

- ``unheld-package``: the first pinned package of ``clouds.local.packages`` loses its
  dpkg hold (``Status: hold ok installed`` -> ``install ok installed``), as if the
  build had forgotten ``apt-mark hold``;
- ``ssh-host-key``: an SSH host key baked into /etc/ssh, as if hygiene had not run
  (every VM started from the image would share it).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.embedded import FAULTS, disk
from imagectl.embedded.procs import ChildFailed, Children

DPKG_STATUS = "/var/lib/dpkg/status"


@dataclass(frozen=True)
class InjectedFault:
    name: str
    detail: str
    expected_check: str  # words the failing check's name or message should contain

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "detail": self.detail, "expected_check": self.expected_check}


def _debugfs(children: Children, raw: Path, commands: list[str], *, write: bool) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".debugfs", delete=False) as fh:
        fh.write("\n".join(commands) + "\n")
        script = fh.name
    try:
        argv = ["debugfs", *(["-w"] if write else []), "-f", script, str(raw)]
        return children.run(argv, name="debugfs", timeout=120)
    finally:
        Path(script).unlink(missing_ok=True)


def _read(children: Children, raw: Path, path: str, dest: Path) -> str:
    dest.unlink(missing_ok=True)
    _debugfs(children, raw, [f"dump {path} {dest}"], write=False)
    if not dest.exists():
        raise UserError(f"cannot read {path} from the candidate disk {raw}")
    return dest.read_text(errors="replace")


def _mtime(children: Children, raw: Path, path: str) -> int | None:
    """A file's mtime (seconds since the epoch) in the ext4 image, from ``debugfs stat``."""
    out = _debugfs(children, raw, [f"stat {path}"], write=False)
    match = re.search(r"^\s*mtime: 0x([0-9a-f]+)", out, re.M)
    return int(match.group(1), 16) if match else None


def _write(
    children: Children, raw: Path, src: Path, path: str, mode: str, mtime: int | None = None
) -> None:
    folder, name = path.rsplit("/", 1)
    times = [f"sif {name} {field} @{mtime}" for field in ("mtime", "ctime")] if mtime else []
    _debugfs(
        children,
        raw,
        [
            f"cd {folder}",
            f"rm {name}",
            f"write {src} {name}",
            f"sif {name} mode {mode}",
            f"sif {name} uid 0",
            f"sif {name} gid 0",
            *times,
        ],
        write=True,
    )


def unhold(status_text: str, package: str) -> str:
    """dpkg status text with ``package``'s hold removed; error if it was not held."""
    out: list[str] = []
    changed = False
    for stanza in status_text.split("\n\n"):
        lines = stanza.split("\n")
        if f"Package: {package}" in lines:
            for i, line in enumerate(lines):
                if line.startswith("Status: hold "):
                    lines[i] = "Status: install " + line[len("Status: hold ") :]
                    changed = True
        out.append("\n".join(lines))
    if not changed:
        raise UserError(
            f"package '{package}' is not held in the candidate, so there is no hold to remove",
            hint="The build should hold every pinned package (apt-mark hold); check the base role",
        )
    return "\n\n".join(out)


def inject(
    children: Children,
    name: str,
    candidate: Path,
    dest: Path,
    *,
    pinned_packages: list[str],
) -> InjectedFault:
    """Write a faulty copy of ``candidate`` to ``dest`` (qcow2)."""
    if name not in FAULTS:
        raise UserError(f"unknown fault '{name}'", hint=f"Use one of: {', '.join(FAULTS)}")
    work = dest.parent / f".{dest.name}.work"
    work.mkdir(parents=True, exist_ok=True)
    raw = disk.to_raw(children, candidate, work / "disk.raw")
    try:
        if name == "unheld-package":
            if not pinned_packages:
                raise UserError("the stack pins no package in clouds.local.packages to unhold")
            package = pinned_packages[0]
            status = _read(children, raw, DPKG_STATUS, work / "status")
            (work / "status.new").write_text(unhold(status, package))
            _write(children, raw, work / "status.new", DPKG_STATUS, "0100644")
            check = _read(children, raw, DPKG_STATUS, work / "status.check")
            if check != (work / "status.new").read_text():
                raise UserError("debugfs did not write the new dpkg status into the candidate")
            fault = InjectedFault(name, f"{package} is no longer held", "hold")
        else:
            key = work / "ssh_host_ed25519_key"
            for p in (key, Path(f"{key}.pub")):
                p.unlink(missing_ok=True)
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "root@build", "-f",
                 str(key)],
                check=True,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            # Dated like the rest of the system set-up (sshd_config), as a key made during
            # the build would be: the validator tells baked keys from first-boot ones by age.
            when = _mtime(children, raw, "/etc/ssh/sshd_config")
            _write(children, raw, key, "/etc/ssh/ssh_host_ed25519_key", "0100600", when)
            _write(children, raw, Path(f"{key}.pub"), "/etc/ssh/ssh_host_ed25519_key.pub",
                   "0100644", when)  # fmt: skip
            listing = _debugfs(children, raw, ["ls -l /etc/ssh"], write=False)
            if "ssh_host_ed25519_key" not in listing:
                raise UserError("debugfs did not write the host key into the candidate")
            fault = InjectedFault(name, "an SSH host key is baked into /etc/ssh", "host key")
        disk.to_qcow2(children, raw, dest)
    except ChildFailed as exc:
        raise UserError(f"injecting fault '{name}' failed: {exc}") from None
    finally:
        raw.unlink(missing_ok=True)
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    return fault
