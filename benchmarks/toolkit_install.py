"""What the validator's GPU toolkit (torch + its CUDA wheels) adds to an image, measured.

Installs the stack's pinned toolkit from an offline wheelhouse into a fresh venv, the way
the validator role does (``pip install --no-index --find-links``, and in ``--short`` mode
``--require-hashes -r requirements.lock`` from the build's own wheelhouse), and prints the
wheelhouse size, the installed size, the install time, and both against the validator
venv without the toolkit.

    python benchmarks/toolkit_install.py --wheelhouse DIR [--stack h100-training]
    python benchmarks/toolkit_install.py --download DIR   # fetch the locked wheels once (GBs)
    python benchmarks/toolkit_install.py --short          # CI: no network, seconds

The CUDA build of torch is several GB from PyPI: fetch it once for a measurement, never in
the test suite (the project's rule). ``--short`` measures the same path on a stand-in: a
wheel named and laid out like the pinned torch (its CUDA variant in ``torch/version.py``)
with ``--payload-mb`` of incompressible data, served by a PEP 503 index on disk; the
build's own ``ensure_toolkit_wheelhouse`` downloads it from there into the tarball the
validator role receives, which is unpacked and installed offline. The validator's core
dependencies (from PyPI) are not installed in that mode: the baseline is the bare venv.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CORE = ("click", "rich", "pydantic", "ruamel.yaml", "PyYAML", "platformdirs", "nvidia-ml-py")


def du(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 100e6 else f"{n / 1e6:,.0f} MB"


def pip(venv: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", *args],
        check=True, env={**os.environ, "PIP_CONSTRAINT": ""},
    )  # fmt: skip
    return time.perf_counter() - started


def stand_in_wheel(folder: Path, version: str, cuda: str, payload_mb: int) -> Path:
    """A wheel named and laid out like torch's (dist-info, ``torch/version.py`` with its
    CUDA variant) carrying ``payload_mb`` of random bytes instead of torch's libraries."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"torch-{version}.dist-info"
    files: dict[str, bytes] = {
        "torch/__init__.py": f"__version__ = {version!r}\n".encode(),
        "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\n".encode(),
        "torch/lib/libstand_in.so": os.urandom(payload_mb << 20),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: imagectl-bench\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def simple_index(root: Path, wheel: Path) -> str:
    """A PEP 503 index on disk serving ``wheel``; its file:// URL."""
    project = root / "torch"
    project.mkdir(parents=True)
    (project / wheel.name).write_bytes(wheel.read_bytes())
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    return root.as_uri()


def short_wheelhouse(resolved, tmp: Path, payload_mb: int) -> tuple[Path, float]:
    """The build's wheelhouse (``ensure_toolkit_wheelhouse``) from a local index serving
    the stand-in, unpacked as the validator role unpacks it; and the time to make it."""
    from imagectl.supply.lock import LockSpec, toolkit_requirement, write_lock
    from imagectl.toolkit import (
        INDEX_ENV,
        PLATFORMS,
        ensure_toolkit_wheelhouse,
        target_python,
        toolkit_pin,
    )

    pin = toolkit_pin(resolved)
    assert pin is not None
    wheel = stand_in_wheel(tmp / "dist", f"{pin.torch}+{pin.variant}", pin.cuda, payload_mb)
    os.environ[INDEX_ENV] = simple_index(tmp / "index", wheel)
    lock = write_lock(  # the stand-in's lock, made as python -m imagectl.supply.lock makes one
        LockSpec(
            path=tmp / "toolkit.lock", title="stand-in", command="benchmark",
            requirements=(toolkit_requirement(pin.torch, pin.variant),),
            index_url=os.environ[INDEX_ENV], pythons=(target_python(resolved),),
            platforms=PLATFORMS,
        )
    )  # fmt: skip
    started = time.perf_counter()
    tarball = ensure_toolkit_wheelhouse(resolved, folder=tmp / "cache", lock=lock)
    seconds = time.perf_counter() - started
    wheelhouse = tmp / "toolkit"
    with tarfile.open(tarball) as tar:
        # the "data" filter where this Python has it (3.12, and 3.10/3.11 security releases)
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(wheelhouse, **safe)
    return wheelhouse, seconds


def main() -> None:
    from imagectl.stacks import load_resolved
    from imagectl.toolkit import ensure_toolkit_wheelhouse, toolkit_pin

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="h100-training")
    ap.add_argument("--wheelhouse", type=Path, help="folder of the toolkit's wheels")
    ap.add_argument("--download", type=Path, help="download the wheels into this folder first")
    ap.add_argument("--short", action="store_true",
                    help="CI mode: a stand-in wheel from a local index, no network")  # fmt: skip
    ap.add_argument("--payload-mb", type=int, default=16, help="the stand-in's size (--short)")
    args = ap.parse_args()
    _, resolved = load_resolved(ROOT / "images", args.stack)
    pin = toolkit_pin(resolved)
    if pin is None:
        raise SystemExit(f"stack {args.stack} pins no validation.toolkit")
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-") as tmp:
        made = None
        if args.short:
            wheelhouse, made = short_wheelhouse(resolved, Path(tmp), args.payload_mb)
        else:
            wheelhouse = args.download or args.wheelhouse
            if wheelhouse is None:
                raise SystemExit("give --wheelhouse DIR (or --download DIR to fetch the wheels "
                                 "once), or --short for the stand-in")  # fmt: skip
            if args.download:  # the build's own hashed path (the toolkit's lock), unpacked
                tarball = ensure_toolkit_wheelhouse(resolved, folder=Path(tmp) / "cache")
                with tarfile.open(tarball) as tar:
                    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                    tar.extractall(wheelhouse, **safe)
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        bare = du(venv)
        core = None if args.short else pip(venv, *CORE)
        validator = du(venv)
        if args.short:  # the build's wheelhouse carries its lock: install as the role does
            locked = ("--require-hashes", "-r", str(wheelhouse / "requirements.lock"))
        else:
            locked = (pin.requirement,)
        seconds = pip(venv, "--no-index", "--find-links", str(wheelhouse), *locked)
        with_toolkit = du(venv)
        wheels = du(wheelhouse)
    added = with_toolkit - validator
    what = f"stand-in for {pin.requirement}" if args.short else pin.requirement
    print(f"toolkit: {what} ({pin.variant}), stack {args.stack}")
    if made is not None:
        print(f"wheelhouse made by the build (ensure_toolkit_wheelhouse, local index): "
              f"{made:.1f} s")  # fmt: skip
    print(f"wheelhouse (download, copied to the builder): {mb(wheels)}")
    if core is None:
        print(f"validator venv without the toolkit: {mb(validator)} (bare venv; --short skips "
              "the core dependencies, which come from PyPI)")  # fmt: skip
    else:
        print(f"validator venv without the toolkit: {mb(validator)} ({mb(bare)} bare venv; "
              f"core dependencies installed in {core:.1f} s)")  # fmt: skip
    print(f"validator venv with the toolkit:    {mb(with_toolkit)}")
    print(f"added to the image: {mb(added)} ({with_toolkit / validator:.1f}x the validator venv)")
    print(f"install time from the offline wheelhouse: {seconds:.1f} s "
          f"({added / 1e6 / max(seconds, 1e-9):,.0f} MB/s)")  # fmt: skip


if __name__ == "__main__":
    main()
