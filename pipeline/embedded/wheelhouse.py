"""The validator's dependency wheels for the local build, as one tarball.

The validator role installs imagectl into /opt/imagectl in the image. A QEMU guest on
this kind of machine cannot install from the package index itself (the index is only
reachable through the host's TLS set-up, and pip under emulation is slow), so the build
hands the role every dependency wheel (``validator_wheelhouse``): ``pip download`` on
the host, pinned to the versions installed next to imagectl, binary wheels only,
for the guest's Python (Debian 12: CPython 3.11, manylinux x86_64). Cached by that
requirement set.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

from imagectl.errors import UserError
from imagectl.paths import state_dir

GUEST_PYTHON = "3.11"  # Debian 12's python3
GUEST_PLATFORM = "manylinux2014_x86_64"


def core_requirements() -> list[str]:
    """imagectl's own dependencies (no extras), pinned to the installed versions."""
    reqs = metadata.requires("imagectl") or []
    names = [r.split(";")[0].strip() for r in reqs if "extra ==" not in r]
    pinned = []
    for req in names:
        name = req.split("[")[0]
        for sep in ("<", ">", "=", "!", "~", " "):
            name = name.split(sep)[0]
        try:
            pinned.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pinned.append(req)
    return sorted(pinned)


def _constraints() -> list[str]:
    out = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in ("imagectl",):
            out.append(f"{name}=={dist.version}")
    return sorted(set(out))


def ensure_wheelhouse() -> Path:
    """``<state>/local/wheelhouse/<key>.tar`` holding every dependency wheel."""
    reqs = core_requirements()
    key = hashlib.sha256("\n".join([GUEST_PYTHON, GUEST_PLATFORM, *reqs]).encode()).hexdigest()[:16]
    folder = state_dir() / "local" / "wheelhouse"
    tarball = folder / f"{key}.tar"
    if tarball.is_file():
        return tarball
    wheels = folder / key
    wheels.mkdir(parents=True, exist_ok=True)
    constraints = folder / f"{key}.constraints.txt"
    constraints.write_text("\n".join(_constraints()) + "\n")
    cmd = [
        sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
        "--dest", str(wheels), "--only-binary=:all:", "--python-version", GUEST_PYTHON,
        "--implementation", "cp", "--platform", GUEST_PLATFORM, "--platform", "any",
        "-c", str(constraints), *reqs,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(
            f"downloading the validator's dependency wheels failed: {proc.stderr[-600:]}",
            hint="The local build needs PyPI (or a pip cache) on this machine",
        )
    partial = tarball.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        for whl in sorted(wheels.glob("*.whl")):
            tar.add(whl, arcname=whl.name)
    os.replace(partial, tarball)
    return tarball
