"""Wall time of `imagectl --help` and `imagectl lint` against a bare `python -c pass`.

Run: .venv/bin/python benchmarks/cli_startup.py [--repeat N] [--short]
Prints the median of N runs for each command and its ratio to the bare interpreter
(``--short``: one run each). A command that exits non-zero stops the benchmark: its time
would not be the command's.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        samples.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(
                f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-600:]}"
            )
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, help="runs per command (default 7; --short 1)")
    parser.add_argument(
        "--short", action="store_true", help="CI mode: small sizes, one repeat; finishes in seconds"
    )
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.short else 7)
    imagectl = shutil.which("imagectl", path=str(Path(sys.executable).parent)) or "imagectl"
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "imagectl --help": [imagectl, "--help"],
        "imagectl lint --help": [imagectl, "lint", "--help"],
        "imagectl lint": [imagectl, "lint"],
        "imagectl compat check": [
            imagectl,
            "compat",
            "check",
            "--driver",
            "580.95.05",
            "--cuda",
            "12.8.1",
            "--gpu",
            "H100-SXM-80GB",
        ],
    }
    base = None
    print(f"{'command':28} {'median s':>9} {'x bare':>7}")
    for name, cmd in cases.items():
        t = timed(cmd, repeat)
        base = base or t
        print(f"{name:28} {t:9.3f} {t / base:7.1f}")


if __name__ == "__main__":
    main()
