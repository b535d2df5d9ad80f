"""Every benchmark runs to the end in its short mode, so a refactor cannot break one unnoticed.

Each ``benchmarks/*.py`` (found by glob: a new benchmark is covered without editing this
file) runs as ``python benchmarks/X.py --short`` in a subprocess, the way ``make
bench-short`` runs it: it must exit 0 and print at least one figure (a decimal number) on
stdout. The short modes finish in seconds and need no network (``--short`` of
``toolkit_install.py`` installs a stand-in wheel from a local index; ``local_e2e.py``
builds nothing). This checks that the benchmarks run, never how fast: the figures are
for people to read (``make bench``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((REPO / "benchmarks").glob("*.py"))
FIGURE = re.compile(r"\d+\.\d+")
# A guard against a hung benchmark (a rendezvous, a VM), not a speed limit: the short
# modes take seconds, but this suite runs three workers on two cores.
HANG_S = 600

pytestmark = pytest.mark.slow


def test_benchmarks_are_found() -> None:
    """The glob finds the benchmarks (an empty parameter list would only skip)."""
    names = {p.name for p in BENCHMARKS}
    assert {"cli_startup.py", "validate_boot.py", "promote_regions.py"} <= names


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.stem)
def test_benchmark_runs_in_short_mode(script: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "--short"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    where = (
        f"{script.name} --short\n--- stdout\n{proc.stdout[-3000:]}\n"
        f"--- stderr\n{proc.stderr[-3000:]}"
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {where}"
    assert FIGURE.search(proc.stdout), f"printed no figure: {where}"


def _recipe(target: str) -> str:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    return makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_make_bench_runs_every_benchmark() -> None:
    """``make bench`` prints the docs' figures: every ``benchmarks/*.py`` runs in its
    recipe in full mode, except the GPU check, which ``make gpu-check`` runs (it needs the
    offline bundle and a device). A new benchmark left out of both fails here."""
    bench, gpu = _recipe("bench"), _recipe("gpu-check")
    missing = [p.name for p in BENCHMARKS if f"benchmarks/{p.name}" not in bench + gpu]
    assert missing == [], f"not run by make bench or make gpu-check: {missing}"
    assert "--short" not in bench  # the figures come from the full modes
