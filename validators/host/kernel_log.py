"""The kernel log of the current boot, and the XIDs and SXids in it.

Read from ``journalctl -k -b`` (falling back to ``dmesg``) or from a file
(``--kernel-log``) or a snapshot. Snapshots keep only the lines that matter to the GPU
checks (``RELEVANT``), which keeps them small and free of unrelated host data.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.core.errors import UserError

RELEVANT = re.compile(r"NVRM|nvidia|Xid|SXid|nvswitch|fallen off the bus|NVLink", re.I)

# NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.
# NVRM: Xid (PCI:0000:2a:00 GPU-I:05 GPU-CI:00): 94, ...  (the driver names the MIG
# instance inside the parentheses; it is an XID of that GPU all the same)
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)(?P<mig>(?:\s+GPU-C?I:\s*\d+)*)\s*\): "
    r"(?P<code>\d+),?\s*(?P<text>.*)$"
)
_PID = re.compile(r"pid=(?P<pid>'?[^,\s']*'?|<unknown>)(?:,\s*name=(?P<name>[^,]*))?")
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
    # processes named by the lines ("pid 4242 (python3)"), in log order, each once
    processes: list[str] = field(default_factory=list)
    # MIG instances named by the lines ("GPU-I:05 GPU-CI:00"), each once
    instances: list[str] = field(default_factory=list)
    # the message of every line (after the code), in log order
    texts: list[str] = field(default_factory=list)
    unnamed: set[str] = field(default_factory=set)  # seconds of lines naming no process

    @property
    def incidents(self) -> int:
        """Application incidents: one per process the lines name (one crash prints
        several lines with one pid) and, for lines that name none, one per second they
        were logged in (one crash prints its lines together)."""
        return max(1, len(self.processes) + len(self.unnamed))


_SECOND = re.compile(r"\d\d:\d\d:\d\d|\[\s*\d+(?=\.)")


def _second(prefix: str) -> str:
    """The second a line was logged in, from its prefix (journal, ISO or dmesg stamp)."""
    m = _SECOND.search(prefix)
    return m.group(0).strip("[ ") if m else prefix.strip()


def _process(text: str) -> str | None:
    m = _PID.search(text)
    if not m:
        return None
    pid = m["pid"].strip("'")
    name = (m["name"] or "").strip().strip("'")
    if pid in ("", "<unknown>") and name in ("", "<unknown>"):
        return None
    return f"pid {pid}" + (f" ({name})" if name and name != "<unknown>" else "")


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
            event = seen.get(key)
            if event is None:
                event = seen[key] = Event(kind, key[1], key[2], m["text"].strip(), 0, [])
            event.count += 1
            event.texts.append(m["text"].strip())
            if len(event.lines) < 3:
                event.lines.append(line.strip())
            proc = _process(m["text"])
            if proc is None:
                event.unnamed.add(_second(line[: m.start()]))
            elif proc not in event.processes:
                event.processes.append(proc)
            mig = " ".join((m.groupdict().get("mig") or "").split())
            if mig and mig not in event.instances:
                event.instances.append(mig)
            break
    return list(seen.values())


# journalctl prints "-- Boot 5f0c...: --" (or "-- Reboot --") between boots
_BOOT_MARK = re.compile(r"^\s*-- (?:Boot [0-9a-f-]+|Reboot)\b", re.I)
# the kernel's first line at every boot
_LINUX_VERSION = re.compile(r"(?:kernel: |\] )Linux version \d")
# short-iso (journalctl -o short-iso) or RFC 3339 timestamps at the start of a line
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)([+-]\d\d:?\d\d|Z)?")
# dmesg -T: "[Fri Aug 30 11:43:09 2024] ..." (read as UTC)
_CTIME = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
# dmesg: "[  812.123456] ..." seconds since this boot
_MONO = re.compile(r"^\[\s*(\d+\.\d+)\]")


def _epoch(line: str) -> float | None:

    m = _ISO.match(line)
    if not m:
        c = _CTIME.match(line)
        if not c:
            return None
        try:
            when = dt.datetime.strptime(" ".join(c[1].split()), "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return None
        return when.replace(tzinfo=dt.timezone.utc).timestamp()
    zone = (m[2] or "+00:00").replace("Z", "+00:00")
    if len(zone) == 5:  # +0000
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        stamp = m[1].replace(",", ".").replace(" ", "T")
        return dt.datetime.fromisoformat(stamp + zone).timestamp()
    except ValueError:
        return None


def current_boot(text: str, booted_at: float | None = None) -> tuple[str, int]:
    """The lines of the last boot in ``text`` and how many earlier lines were dropped."""
    current, _previous, dropped = split_boots(text, booted_at)
    return current, dropped


def split_boots(text: str, booted_at: float | None = None) -> tuple[str, str, int]:
    """This boot's lines, the previous boot's lines, and how many lines are not this boot's.

    A log that spans boots (a ``--kernel-log`` file, ``journalctl -k`` without ``-b``)
    counts only its last boot: after the last ``-- Boot <id> --`` marker or kernel
    ``Linux version`` banner, after dmesg's seconds-since-boot go backwards, and without
    lines stamped before ``booted_at`` (this boot's start, epoch seconds). The previous
    boot's lines (between the last two boundaries, and lines stamped before this boot)
    are evidence of a fault a reboot did not clear.
    """
    lines = text.splitlines()
    start, prev_start = 0, 0
    last_mono = -1.0
    for i, line in enumerate(lines):
        if _BOOT_MARK.match(line):
            start, prev_start = i + 1, start
            last_mono = -1.0
            continue
        if _LINUX_VERSION.search(line) and i > start:
            start, prev_start = i, start
        m = _MONO.match(line)
        if m:
            mono = float(m[1])
            if mono < last_mono and i > start:
                start, prev_start = i, start
            last_mono = mono
    kept = lines[start:]
    previous = [ln for ln in lines[prev_start:start] if not _BOOT_MARK.match(ln)]
    if booted_at is not None:
        slack = 2.0  # clocks and rounding: a line stamped in the boot's first seconds
        early = [(t := _epoch(ln)) is not None and t < booted_at - slack for ln in kept]
        before = [ln for ln, e in zip(kept, early, strict=True) if e]
        kept = [ln for ln, e in zip(kept, early, strict=True) if not e]
        previous = previous or before
    dropped = len(lines) - len(kept)

    def joined(part: list[str]) -> str:
        return "\n".join(part) + ("\n" if part else "")

    return joined(kept), joined(previous), dropped


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
    try:
        return KernelLog(path.read_text(encoding="utf-8", errors="replace"), f"file:{path}")
    except OSError as exc:
        raise UserError(f"cannot read the kernel log {path}: {exc.strerror}") from exc


def relevant_only(log: KernelLog) -> KernelLog:
    lines = [line for line in log.text.splitlines() if RELEVANT.search(line)]
    return KernelLog("\n".join(lines) + ("\n" if lines else ""), log.source, log.error, True)
