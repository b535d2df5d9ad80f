"""The image with and without the validator's GPU toolkit, and what installing it at
validation time adds to a validation run.

A lean image (``validation.toolkit.install: at-validation``, the default) keeps the
validator and its locked dependencies; the toolkit is installed on the validation host for
the run only, by the validator's own code (``imagectl.validators.toolkit_venv``: unpack
the controller's hashed wheelhouse, venv without pip, ``pip install --no-index
--require-hashes``), then removed. This prints:

- the validator venv alone (what a lean image carries; installed from
  validators/requirements.lock's wheelhouse the way the validator role installs it);
- the toolkit's wheelhouse and installed size, and that venv with the toolkit (what a
  baked image carries), measured on torch's CPU wheels (``pip download torch==RELEASE``:
  the CPU build; the CUDA build is several GB and comes from download.pytorch.org);
- the seconds ``toolkit_venv`` takes to install it, i.e. what a validation run adds on
  the host (plus the copy: the wheelhouse's size over the runner's link);
- the CUDA variant (torch 2.9.1+cu128): measured with ``--cuda-wheelhouse DIR`` (its
  wheels, e.g. from ``benchmarks/toolkit_install.py --download``), else the figures
  ``benchmarks/toolkit_install.py`` measured on this machine (docs/stacks.md).

    python benchmarks/toolkit_lean.py [--torch 2.13.0] [--cuda-wheelhouse DIR]
    python benchmarks/toolkit_lean.py --short   # CI: no network, a stand-in toolkit
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from toolkit_install import du, mb, stand_in_wheel  # noqa: E402  (benchmarks/)

from imagectl.supply.validator import ensure_validator_wheelhouse  # noqa: E402
from imagectl.validators.toolkit_venv import toolkit_venv  # noqa: E402

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
# benchmarks/toolkit_install.py on this 2-core machine, torch 2.9.1+cu128 (docs/stacks.md)
CUDA_MEASURED = {"wheelhouse": 4.1e9, "installed": 7.1e9, "install_s": 115.0}


def wheelhouse_of(wheels: list[Path], dest: Path) -> Path:
    """A wheelhouse tarball as imagectl.supply makes one: the wheels, flat, and the
    requirements.lock pinning each by sha256."""
    lines = []
    for wheel in sorted(wheels):
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name}=={version} --hash=sha256:{digest}")
    tarball = dest / "toolkit.tar"
    with tarfile.open(tarball, "w") as tar:
        lock = ("\n".join(lines) + "\n").encode()
        info = tarfile.TarInfo("requirements.lock")
        info.size = len(lock)
        tar.addfile(info, io.BytesIO(lock))
        for wheel in wheels:
            tar.add(wheel, arcname=wheel.name)
    return tarball


def validator_venv(tmp: Path, short: bool) -> tuple[Path, int]:
    """The validator's venv as a lean image has it (the bare venv in --short mode)."""
    venv = tmp / "opt-imagectl"
    bare = ["--without-pip"] if short else []  # the image's has pip (python3 -m venv)
    subprocess.run([sys.executable, "-m", "venv", *bare, str(venv)], check=True)
    if not short:
        wheelhouse = ensure_validator_wheelhouse(PYTHON, folder=tmp / "validator-wheelhouse")
        wheels = tmp / "validator-wheels"
        with tarfile.open(wheelhouse) as tar:
            tar.extractall(wheels, filter="data")
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
             "--no-index", "--find-links", str(wheels), "--require-hashes", "-r",
             str(wheels / "requirements.lock")],
            check=True,
        )  # fmt: skip
    return venv, du(venv)


def toolkit_wheels(tmp: Path, torch: str, short: bool, payload_mb: int) -> list[Path]:
    folder = tmp / "toolkit-wheels"
    if short:
        return [stand_in_wheel(folder, f"{torch}+cpu", "", payload_mb)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--only-binary=:all:", f"torch=={torch}", "-d", str(folder)],
        check=True,
    )  # fmt: skip
    return sorted(folder.glob("*.whl"))


def measure(tarball: Path) -> tuple[int, float]:
    """(installed bytes, seconds): the toolkit venv the validator makes for a run."""
    started = time.perf_counter()
    with toolkit_venv(tarball) as installed:
        took = time.perf_counter() - started
        size = du(Path(installed.venv))
    return size, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="stand-in toolkit, no network")
    ap.add_argument("--torch", default="2.13.0", help="torch release whose CPU wheels to use")
    ap.add_argument("--payload-mb", type=int, default=8, help="--short: stand-in size")
    ap.add_argument("--cuda-wheelhouse", type=Path, help="folder of the CUDA toolkit's wheels")
    ap.add_argument("--link-gbps", type=float, default=1.0, help="runner -> host link")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-lean-") as tmp_name:
        tmp = Path(tmp_name)
        _, lean = validator_venv(tmp, args.short)
        wheels = toolkit_wheels(tmp, args.torch, args.short, args.payload_mb)
        (tmp / "host").mkdir()
        tarball = wheelhouse_of(wheels, tmp / "host")
        installed, took = measure(tarball)
        shipped = tarball.stat().st_size
        what = "stand-in" if args.short else f"torch {args.torch} CPU wheels"
        rows = [("validator venv alone (lean image)", mb(lean), "")]
        rows.append((f"toolkit ({what}): wheelhouse", mb(shipped), ""))
        rows.append((f"toolkit ({what}): installed", mb(installed), ""))
        rows.append(("validator venv + toolkit (baked image)", mb(lean + installed), ""))
        rows.append(("validation time added: install on the host", f"{took:.1f} s", ""))
        copy_s = shipped * 8 / (args.link_gbps * 1e9)
        rows.append((f"  + copy at {args.link_gbps:g} Gbit/s", f"{copy_s:.1f} s", ""))
        if args.cuda_wheelhouse:
            cuda_tar = wheelhouse_of(sorted(args.cuda_wheelhouse.glob("*.whl")), tmp / "host")
            cuda_installed, cuda_s = measure(cuda_tar)
            cuda = {"wheelhouse": float(cuda_tar.stat().st_size), "installed": cuda_installed,
                    "install_s": cuda_s}  # fmt: skip
            source = "measured now"
        else:
            cuda, source = CUDA_MEASURED, "as toolkit_install.py measured it"
        rows.append((f"torch 2.9.1+cu128 ({source}): wheelhouse", mb(int(cuda["wheelhouse"])), ""))
        rows.append(("torch 2.9.1+cu128: installed (saved per image)",
                     mb(int(cuda["installed"])), ""))  # fmt: skip
        cu_copy = cuda["wheelhouse"] * 8 / (args.link_gbps * 1e9)
        rows.append(("torch 2.9.1+cu128: validation time added",
                     f"{cuda['install_s']:.0f} s + {cu_copy:.0f} s copy", ""))  # fmt: skip
        width = max(len(r[0]) for r in rows)
        print(f"validator toolkit at validation time (Python {PYTHON})")
        for name, value, _ in rows:
            print(f"  {name:<{width}}  {value:>14}")


if __name__ == "__main__":
    main()
