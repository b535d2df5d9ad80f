"""Benchmark: the passive watcher's CPU cost (the goal: at most 1% of one core at its
default interval, 60 s).

Runs ``imagectl watch --replay SNAPSHOT --interval I`` as the systemd unit runs it (one
long-lived process), over a replayed 8-GPU snapshot whose kernel log holds this boot's
lines (``--log-lines``, default 20,000: a busy node's journal since boot, Xid lines among
them), and reads the process's own CPU time (``/proc/PID/stat`` utime + stime) after a
warm-up, so the interpreter's start is not counted. CPU per look x (1 / default interval)
is the share of one core at the default interval. Also times the live log read the unit
does instead of the replay (``journalctl -k -b``, a child process) on this host, when
journalctl answers here.

Usage: python benchmarks/watcher_cpu.py [--seconds S] [--interval I] [--log-lines N]
[--short] (``--short``: 3 s measured).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"
DEFAULT_INTERVAL_S = 60.0
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def _snapshot(folder: Path, lines: int) -> Path:
    snap = json.loads(SNAPSHOT.read_text())
    booted = time.time() - 86400
    snap["host"]["boot"]["booted_at"] = booted
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(booted + 60))
    text = [f"{stamp} host kernel: eth0: link up, 100Gbps, full duplex" for _ in range(lines)]
    text[::1000] = [f"{stamp} host kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, "
                    "GPU has fallen off the bus."] * len(text[::1000])  # fmt: skip
    snap["kernel_log"] = {**snap["kernel_log"], "text": "\n".join(text) + "\n"}
    path = folder / "node.json"
    path.write_text(json.dumps(snap))
    return path


def journal_read_cpu() -> float | None:
    """CPU seconds (children) of one `journalctl -k -b` as the live watcher runs it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-iso"],
                              capture_output=True, timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, help="measured time (default 30; --short: 3)")
    ap.add_argument("--interval", type=float, default=1.0, help="look interval while measured")
    ap.add_argument("--log-lines", type=int, default=20_000)
    ap.add_argument("--short", action="store_true")
    args = ap.parse_args()
    seconds = args.seconds or (3.0 if args.short else 30.0)
    imagectl = str(Path(sys.executable).with_name("imagectl"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        snap = _snapshot(folder, args.log_lines)
        out = folder / "imagectl-watch.prom"
        proc = subprocess.Popen(
            [imagectl, "watch", "--replay", str(snap), "--interval", str(args.interval),
             "--prometheus", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not out.exists():  # warmed up: imports done, first look written
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the watcher did not start: {proc.stderr.read().decode()[-2000:]}")
                time.sleep(0.05)
            start_cpu, start = _cpu_s(proc.pid), time.monotonic()
            time.sleep(seconds)
            cpu, wall = _cpu_s(proc.pid) - start_cpu, time.monotonic() - start
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    looks = max(1.0, wall / args.interval)
    per_look = cpu / looks
    print(f"looks: {looks:.0f} in {wall:.1f} s, kernel log of {args.log_lines} lines (replay)")
    print(f"CPU per look: {per_look * 1000:.1f} ms (clock ticks of {1000 / TICK:.0f} ms)")
    print(f"share of one core at the default {DEFAULT_INTERVAL_S:.0f} s interval: "
          f"{100 * per_look / DEFAULT_INTERVAL_S:.4f} %")  # fmt: skip
    journal = journal_read_cpu()
    if journal is None:
        print("live journal read: journalctl -k -b does not answer on this host (not measured)")
    else:
        total = per_look + journal
        print(f"live journal read (journalctl -k -b): {journal * 1000:.1f} ms CPU; with it "
              f"{100 * total / DEFAULT_INTERVAL_S:.4f} % of one core at 60 s")  # fmt: skip


if __name__ == "__main__":
    main()
