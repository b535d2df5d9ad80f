"""The validator's GPU toolkit wheelhouse, made on the controller for the image's Python.

A GPU stack pins ``validation.toolkit`` (torch + CUDA variant, images/compat/toolkits.yaml).
The build downloads those wheels once, on the controller, for the image's distribution
Python (binary wheels only), checks that the torch wheel really is the pinned CUDA variant,
and hands one tarball to the validator role, which installs it offline (``--no-index``)
into the image's validator venv. Cached under the state folder by what goes into it.

``IMAGECTL_TOOLKIT_INDEX_URL`` replaces PyTorch's own index (a mirror in an air-gapped
CI, or a local PEP 503 index in tests).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from imagectl.compat.data import load_compat
from imagectl.errors import UserError
from imagectl.paths import find_workspace, state_dir
from imagectl.stacks.resolve import ResolvedStack
from imagectl.validators.compute.readiness import torch_cuda_of

INDEX_ENV = "IMAGECTL_TOOLKIT_INDEX_URL"
# The distribution's own python3 (the validator venv's interpreter): Ubuntu 22.04 ships
# 3.10, 24.04 ships 3.12, Debian 12 ships 3.11 (each release's python3 package).
DISTRO_PYTHON = {"ubuntu-22.04": "3.10", "ubuntu-24.04": "3.12", "debian-12": "3.11"}
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
)


@dataclass(frozen=True)
class ToolkitPin:
    torch: str
    cuda: str  # 12.8
    variant: str  # cu128
    index_url: str

    @property
    def requirement(self) -> str:
        return f"torch=={self.torch}"


def toolkit_pin(resolved: ResolvedStack) -> ToolkitPin | None:
    """The stack's pinned toolkit with the index that serves its variant, or None."""
    tk = resolved.validator_toolkit
    if tk is None:
        return None
    index = os.environ.get(INDEX_ENV) or load_compat(find_workspace().compat_dir).toolkit_index
    return ToolkitPin(tk["torch"], tk["cuda"], tk["variant"], index.format(variant=tk["variant"]))


def target_python(resolved: ResolvedStack) -> str:
    os_pins = resolved.stack.os
    key = f"{os_pins.distro}-{os_pins.release}"
    if key not in DISTRO_PYTHON:
        raise UserError(
            f"no known python3 for {key}",
            hint="Add the distribution's python3 version to DISTRO_PYTHON in pipeline/toolkit.py",
        )
    return DISTRO_PYTHON[key]


def download_command(pin: ToolkitPin, dest: Path, *, python: str) -> list[str]:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    return [
        sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
        "--dest", str(dest), "--only-binary=:all:", "--python-version", python,
        "--implementation", "cp", *platforms, "--platform", "any",
        "--index-url", pin.index_url, pin.requirement,
    ]  # fmt: skip


def wheel_cuda(wheel: Path) -> str | None:
    """The CUDA version a torch wheel was built for (its torch/version.py), None for cpu."""
    with zipfile.ZipFile(wheel) as zf:
        return torch_cuda_of(zf.read("torch/version.py").decode("utf-8", "replace"))


def ensure_toolkit_wheelhouse(resolved: ResolvedStack, *, folder: Path | None = None) -> Path:
    """``<state>/wheelhouse/toolkit/<key>.tar``: the pinned toolkit's wheels, checked."""
    pin = toolkit_pin(resolved)
    if pin is None:
        raise UserError("the stack pins no validation.toolkit: there is no toolkit to install")
    python = target_python(resolved)
    key = hashlib.sha256(
        "\n".join([pin.requirement, pin.variant, pin.index_url, python, *PLATFORMS]).encode()
    ).hexdigest()[:16]
    folder = folder or state_dir() / "wheelhouse" / "toolkit"
    tarball = folder / f"{key}.tar"
    if tarball.is_file():
        return tarball
    wheels = folder / key
    wheels.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PIP_CONSTRAINT="", PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="")
    cmd = download_command(pin, wheels, python=python)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise UserError(
            f"downloading the validator toolkit {pin.requirement} ({pin.variant}) from "
            f"{pin.index_url} failed: {proc.stderr.strip()[-600:]}",
            hint=f"The build needs that index (or a mirror in ${INDEX_ENV})",
        )
    torch_wheels = sorted(wheels.glob("torch-*.whl"))
    if not torch_wheels:
        raise UserError(f"{pin.index_url} served no torch wheel for {pin.requirement}")
    built_for = wheel_cuda(torch_wheels[-1])
    if built_for != pin.cuda:
        raise UserError(
            f"{pin.index_url} served {torch_wheels[-1].name}, built for CUDA "
            f"{built_for or 'none (cpu)'}, but the stack pins the {pin.variant} variant "
            f"(CUDA {pin.cuda})",
            where="validation.toolkit",
            hint="Point the index at the variant's own (https://download.pytorch.org/whl/"
            f"{pin.variant}) or a mirror of it",
        )
    partial = tarball.with_suffix(".partial")
    try:
        with tarfile.open(partial, "w") as tar:
            for whl in sorted(wheels.glob("*.whl")):
                tar.add(whl, arcname=whl.name)
        os.replace(partial, tarball)
    finally:
        partial.unlink(missing_ok=True)
    return tarball
