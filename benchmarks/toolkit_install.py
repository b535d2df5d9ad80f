"""What the validator's GPU toolkit (torch + its CUDA wheels) adds to an image, measured.

Installs the stack's pinned toolkit from an offline wheelhouse into a fresh venv, the way
the validator role does (``pip install --no-index --find-links``), and prints the
wheelhouse size, the installed size, the install time, and both against the validator
venv without the toolkit.

    python benchmarks/toolkit_install.py --wheelhouse DIR [--stack h100-training]
    python benchmarks/toolkit_install.py --download DIR   # fetch the wheels once (GBs)

The CUDA build of torch is several GB from PyPI: fetch it once for a measurement, never in
the test suite (the project's rule).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def du(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def pip(venv: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", *args],
        check=True, env={**os.environ, "PIP_CONSTRAINT": ""},
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    from imagectl.stacks import load_resolved
    from imagectl.toolkit import download_command, toolkit_pin

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="h100-training")
    ap.add_argument("--wheelhouse", type=Path, help="folder of the toolkit's wheels")
    ap.add_argument("--download", type=Path, help="download the wheels into this folder first")
    args = ap.parse_args()
    _, resolved = load_resolved(ROOT / "images", args.stack)
    pin = toolkit_pin(resolved)
    if pin is None:
        raise SystemExit(f"stack {args.stack} pins no validation.toolkit")
    wheelhouse = args.download or args.wheelhouse
    if wheelhouse is None:
        raise SystemExit("give --wheelhouse DIR (or --download DIR to fetch the wheels once)")
    if args.download:
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        subprocess.run(download_command(pin, wheelhouse, python=py), check=True)
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        bare = du(venv)
        core = pip(venv, "click", "rich", "pydantic", "ruamel.yaml", "PyYAML", "platformdirs",
                   "nvidia-ml-py", "pytest-testinfra")  # fmt: skip
        validator = du(venv)
        seconds = pip(venv, "--no-index", "--find-links", str(wheelhouse), pin.requirement)
        with_toolkit = du(venv)
    added = with_toolkit - validator
    print(f"toolkit: {pin.requirement} ({pin.variant}), stack {args.stack}")
    print(f"wheelhouse (download, copied to the builder): {mb(du(wheelhouse))}")
    print(f"validator venv without the toolkit: {mb(validator)} ({mb(bare)} bare venv; "
          f"core dependencies installed in {core:.1f} s)")  # fmt: skip
    print(f"validator venv with the toolkit:    {mb(with_toolkit)}")
    print(f"added to the image: {mb(added)} ({with_toolkit / validator:.1f}x the validator venv)")
    print(f"install time from the offline wheelhouse: {seconds:.1f} s")


if __name__ == "__main__":
    main()
