"""Cold and warm timings of ``imagectl run --stack local``, step by step.

Runs the real command three times in one fresh state folder:

- cold:          nothing cached (debootstrap, build, boot, validate, promote);
- warm-rebuild:  base image cached, candidate rebuilt (``--rebuild``);
- warm:          base and candidate cached (unchanged inputs): boot, validate, decide;

and prints each run's per-step seconds, its total, and the ratio to the issue's budget
(cold <= 20 min, warm <= 8 min on a 2-core machine without KVM). Needs root, debootstrap,
qemu, packer and the Debian archive. Usage::

    sudo .venv/bin/python benchmarks/local_e2e.py [--state DIR] [--only cold,warm] [--json]

The machine's load average is printed with every run: timings under TCG scale with the
CPU time the emulator gets.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = {"cold": 20 * 60, "warm-rebuild": 8 * 60, "warm": 8 * 60}
ARGS = {"cold": [], "warm-rebuild": ["--rebuild"], "warm": []}


def run_once(state: Path, extra: list[str]) -> tuple[int, dict, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env["IMAGECTL_STATE_DIR"] = str(state)
    imagectl = str(Path(sys.executable).parent / "imagectl")
    start = time.monotonic()
    proc = subprocess.run(
        [imagectl, "--root", str(REPO), "run", "--stack", "local", "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        env=env,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        data = {"error": "no JSON output", "timings": {}}
    return proc.returncode, data, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, help="state folder (default: a new temporary one)")
    parser.add_argument("--only", default="cold,warm-rebuild,warm")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
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
