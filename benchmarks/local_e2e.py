"""Cold and warm timings of ``imagectl run --stack local``, step by step.

Runs the real command three times in one fresh state folder:

- cold:          nothing cached (debootstrap, build, boot, validate, promote);
- warm-rebuild:  base image cached, candidate rebuilt (``--rebuild``);
- warm:          base and candidate cached (unchanged inputs): boot, validate, decide;

and prints each run's per-step seconds, its total, and the ratio to the issue's budget
(cold <= 20 min, warm <= 8 min on a 2-core machine without KVM). Needs root, debootstrap,
qemu, packer and the Debian archive. Usage::

    sudo .venv/bin/python benchmarks/local_e2e.py [--state DIR] [--only cold,warm] [--json]
    .venv/bin/python benchmarks/local_e2e.py --short

The machine's load average is printed with every run: timings under TCG scale with the
CPU time the emulator gets.

``--short`` (CI) cannot build or boot anything in seconds and without the network: it says
so, then runs the same harness on the real ``imagectl run --stack local --json`` with a
``--regions`` count beyond the stack's, which the command refuses (exit 2) before its
first step: the fixed cost of every run (start-up, stack resolution, option checks) and
the proof that the harness still drives the command. It also lists the tools the full
mode needs and whether this machine has them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = {"cold": 20 * 60, "warm-rebuild": 8 * 60, "warm": 8 * 60}
ARGS = {"cold": [], "warm-rebuild": ["--rebuild"], "warm": []}


TOOLS = ("debootstrap", "qemu-system-x86_64", "qemu-img", "packer", "mkfs.ext4")


def run_once(
    state: Path, extra: list[str], timeout_s: float | None = None
) -> tuple[int, dict, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env["IMAGECTL_STATE_DIR"] = str(state)
    imagectl = str(Path(sys.executable).parent / "imagectl")
    start = time.monotonic()
    proc = subprocess.Popen(
        [imagectl, "--root", str(REPO), "run", "--stack", "local", "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        env=env,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # imagectl run stops its children on SIGTERM; the group's SIGKILL is the backstop
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        raise SystemExit(
            f"imagectl run {' '.join(extra)} still ran after {timeout_s:.0f} s"
        ) from None
    wall = time.monotonic() - start
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        data = {"error": "no JSON output", "timings": {}}
    return proc.returncode, data, wall


def short() -> int:
    """CI's mode: the harness on a run the command refuses before its first step."""
    from imagectl.stacks import load_resolved

    print(
        "--short: cold, warm-rebuild and warm runs skipped: each builds or boots a Debian VM "
        "(debootstrap from the Debian archive, Packer, QEMU), minutes and the network; run "
        "without --short (as root) for them",
        flush=True,
    )
    _, resolved = load_resolved(REPO / "images", "local")
    local = resolved.stack.clouds.local
    regions = len(local.regions) if local is not None else 0
    beyond = ["--regions", str(regions + 1)]
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-") as tmp:
        state = Path(tmp) / "state"
        load = os.getloadavg()[0]
        code, _data, wall = run_once(state, beyond, timeout_s=120)
    budget = BUDGET_S["warm"]
    print(
        f"{'pre-flight':13s} exit {code} (refused {' '.join(beyond)}: the stack has {regions}) "
        f"{wall:7.2f} s ({wall / budget:.4f} x budget {budget} s, load {load:.1f})",
        flush=True,
    )
    tools = ", ".join(f"{t} {'yes' if shutil.which(t) else 'MISSING'}" for t in TOOLS)
    print(f"full mode needs root ({'yes' if os.geteuid() == 0 else 'no'}), {tools}")
    if code != 2:
        print(f"expected exit 2 (bad input) from imagectl run {' '.join(beyond)}, got {code}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, help="state folder (default: a new temporary one)")
    parser.add_argument("--only", default="cold,warm-rebuild,warm")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--short", action="store_true", help="CI mode: no build or boot (see the docstring)"
    )
    args = parser.parse_args()
    if args.short:
        return short()
    state = args.state or Path(tempfile.mkdtemp(prefix="imagectl-bench-"))
    rows = []
    for name in args.only.split(","):
        load = os.getloadavg()[0]
        code, data, wall = run_once(state, ARGS[name])
        rows.append(
            {
                "run": name,
                "exit": code,
                "outcome": data.get("outcome"),
                "wall_s": round(wall, 1),
                "budget_s": BUDGET_S[name],
                "ratio_to_budget": round(wall / BUDGET_S[name], 2),
                "load_avg_1m_at_start": round(load, 1),
                "steps_s": data.get("timings", {}),
                "accel": (data.get("accel") or {}).get("name"),
                "error": data.get("error"),
            }
        )
        print(
            f"{name:13s} exit {code} {data.get('outcome')!s:9s} {wall:7.1f} s "
            f"({wall / BUDGET_S[name]:.2f} x budget {BUDGET_S[name]} s, load {load:.1f})",
            flush=True,
        )
        for step, seconds in data.get("timings", {}).items():
            print(f"    {step:10s} {seconds:8.1f} s", flush=True)
    if args.json:
        print(json.dumps({"state": str(state), "runs": rows}, indent=2))
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
