"""The kernel log of the current boot, and the XIDs and SXids in it.

Read from ``journalctl -k -b`` (falling back to ``dmesg``) or from a file
(``--kernel-log``) or a snapshot. Snapshots keep only the lines that matter to the GPU
checks (``RELEVANT``), which keeps them small and free of unrelated host data.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

RELEVANT = re.compile(r"NVRM|nvidia|Xid|SXid|nvswitch|fallen off the bus|NVLink", re.I)

# NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+),?\s*(?P<text>.*)$")
# nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 32 egress ...
_SXID = re.compile(
    r"nvidia-nvswitch(?P<sw>\d*): SXid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): "
    r"(?P<code>\d+),?\s*(?P<text>.*)$"
)
# NVRM: API mismatch: the client has the version 580.95.05, but this kernel module has
# the version 570.172.08.
# (the second line carries its own timestamp / "NVRM:" prefix)
_API_MISMATCH = re.compile(
    r"NVRM: API mismatch: the client has the version (?P<client>[\d.]+), but"
    r".{0,160}?kernel module has the version (?P<module>\d+(?:\.\d+)+)",
    re.S,
)


@dataclass
class KernelLog:
    text: str
    source: str
    error: str | None = None
    filtered: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "error": self.error,
            "filtered": self.filtered,
            "text": self.text,
        }


@dataclass
class Event:
    kind: str  # "xid" | "sxid"
    code: int
    bus: str  # normalised PCI address "0000:3b:00"
    text: str
    count: int = 1
    lines: list[str] = field(default_factory=list)


def normalise_bus(bus: str) -> str:
    """'00000000:3B:00.0' or '0000:3b:00' -> '0000:3b:00' (domain:bus:device)."""
    parts = bus.lower().split(":")
    if len(parts) == 2:  # bus:device.fn
        parts = ["0000", *parts]
    domain = parts[0][-4:].rjust(4, "0")
    device = parts[2].split(".")[0] if len(parts) > 2 else "00"
    return f"{domain}:{parts[1]}:{device}"


def parse_events(text: str) -> list[Event]:
    """XIDs and SXids, deduplicated by (kind, code, device) with a count, in log order."""
    seen: dict[tuple[str, int, str], Event] = {}
    for line in text.splitlines():
        for kind, rx in (("xid", _XID), ("sxid", _SXID)):
            m = rx.search(line)
            if not m:
                continue
            key = (kind, int(m["code"]), normalise_bus(m["bus"]))
            if key in seen:
                seen[key].count += 1
                if len(seen[key].lines) < 3:
                    seen[key].lines.append(line.strip())
            else:
                seen[key] = Event(kind, key[1], key[2], m["text"].strip(), 1, [line.strip()])
            break
    return list(seen.values())


def api_mismatch(text: str) -> tuple[str, str] | None:
    m = _API_MISMATCH.search(text)
    return (m["client"], m["module"]) if m else None


def _run(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, "", f"{cmd[0]} not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{cmd[0]} timed out after {timeout:.0f} s"
    return p.returncode, p.stdout, p.stderr


def read_host_log(timeout: float = 10.0) -> KernelLog:
    """``journalctl -k -b`` (this boot's kernel messages), else ``dmesg``."""
    problems = []
    rc, out, err = _run(["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-iso"], timeout)
    if rc == 0 and out.strip():
        return KernelLog(out, "journalctl -k -b")
    problems.append(f"journalctl: {(err or 'no entries').strip()[:200]}")
    rc, out, err = _run(["dmesg"], timeout)
    if rc == 0 and out.strip():
        return KernelLog(out, "dmesg")
    problems.append(f"dmesg: {(err or 'no output').strip()[:200]}")
    return KernelLog("", "none", error="; ".join(problems))


def read_file_log(path: Path) -> KernelLog:
    from imagectl.errors import UserError

    try:
        return KernelLog(path.read_text(encoding="utf-8", errors="replace"), f"file:{path}")
    except OSError as exc:
        raise UserError(f"cannot read the kernel log {path}: {exc.strerror}") from exc


def relevant_only(log: KernelLog) -> KernelLog:
    lines = [line for line in log.text.splitlines() if RELEVANT.search(line)]
    return KernelLog("\n".join(lines) + ("\n" if lines else ""), log.source, log.error, True)
