"""The validator's GPU toolkit wheelhouse, made on the controller for the image's Python.

A GPU stack pins ``validation.toolkit`` (torch + CUDA variant, images/compat/toolkits.yaml).
The controller downloads those wheels once for the image's distribution Python (binary
wheels only), exactly as the toolkit's lock pins them (sha256 per wheel,
``imagectl.supply``; a cached tarball is checked again before reuse), checks that the
torch wheel really is the pinned CUDA variant, and makes one tarball (the wheels and their
lock). By default (``install: at-validation``) ``imagectl validate-image`` ships it to each
validation host, whose validator installs it offline (``--no-index --require-hashes``)
into a venv for that run only (``imagectl.validation.toolkit``,
``imagectl.validators.toolkit_venv``): the image does not carry it. With ``install:
bake`` the build hands it to the validator role, which installs it into the image's
validator venv.

``IMAGECTL_TOOLKIT_INDEX_URL`` replaces PyTorch's own index (a mirror in an air-gapped
CI, or a local PEP 503 index in tests).
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from imagectl.compat.data import load_compat
from imagectl.core.errors import UserError
from imagectl.paths import find_workspace, state_dir
from imagectl.stacks.resolve import ResolvedStack
from imagectl.supply.lock import toolkit_lock_path
from imagectl.supply.lockfile import load
from imagectl.supply.targets import DISTRO_PYTHON, PLATFORMS
from imagectl.supply.wheelhouse import ensure_wheelhouse
from imagectl.validators.compute.readiness import torch_cuda_of

INDEX_ENV = "IMAGECTL_TOOLKIT_INDEX_URL"


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


def baked(resolved: ResolvedStack) -> bool:
    """The image's validator venv carries the toolkit (``validation.toolkit.install:
    bake``); by default it does not, and validate-image installs it on the validation host
    for the run only (``imagectl.validation.toolkit``)."""
    tk = resolved.stack.validation.toolkit
    return tk is not None and tk.install == "bake"


def target_python(resolved: ResolvedStack) -> str:
    os_pins = resolved.stack.os
    key = f"{os_pins.distro}-{os_pins.release}"
    if key not in DISTRO_PYTHON:
        raise UserError(
            f"no known python3 for {key}",
            hint="Add the distribution's python3 version to DISTRO_PYTHON in pipeline/toolkit.py",
        )
    return DISTRO_PYTHON[key]


def wheel_cuda(wheel: Path | IO[bytes]) -> str | None:
    """The CUDA version a torch wheel was built for (its torch/version.py), None for cpu."""
    with zipfile.ZipFile(wheel) as zf:
        return torch_cuda_of(zf.read("torch/version.py").decode("utf-8", "replace"))


def ensure_toolkit_wheelhouse(
    resolved: ResolvedStack,
    *,
    folder: Path | None = None,
    lock: Path | None = None,
    index_url: str | None = None,
) -> Path:
    """``<state>/wheelhouse/toolkit/<key>.tar``: the pinned toolkit's wheels, exactly as its
    lock pins them (``images/compat/locks/torch-<release>-<variant>.lock``, sha256 per
    wheel; ``imagectl.supply``), with that lock, the torch wheel checked for its variant.
    ``lock`` and ``index_url`` name another lock and the index (or mirror) serving it."""
    pin = toolkit_pin(resolved)
    if pin is None:
        raise UserError("the stack pins no validation.toolkit: there is no toolkit to install")
    python = target_python(resolved)
    lock_path = lock or toolkit_lock_path(pin.torch, pin.variant)
    if not lock_path.is_file():
        raise UserError(
            f"no lock file at {lock_path}: the toolkit {pin.requirement} ({pin.variant}) is "
            "installed only from its lock (a sha256 per wheel), and the repository ships "
            "none for it (a lock is made from the variant's own index, which a build must "
            "not reach unpinned)",
            where="validation.toolkit",
            hint="Make it where the index is reachable: python -m imagectl.supply.lock "
            "toolkit (deterministic), review the diff and commit it",
        )
    entry = load(lock_path).entry("torch")
    if entry is None or entry.version.split("+")[0] != pin.torch:
        raise UserError(
            f"the lock pins torch {entry.version if entry else 'nothing'}, but the stack "
            f"pins {pin.requirement} ({pin.variant})",
            where=str(lock_path),
            hint="Regenerate it: python -m imagectl.supply.lock toolkit",
        )
    tarball = ensure_wheelhouse(
        lock_path,
        python=python,
        platforms=PLATFORMS,
        folder=folder or state_dir() / "wheelhouse" / "toolkit",
        index_url=index_url or pin.index_url,
        what=f"validator toolkit {pin.requirement} ({pin.variant})",
    )
    with tarfile.open(tarball) as tar:
        member = next(m for m in tar.getmembers() if m.name.startswith("torch-"))
        built_for = wheel_cuda(tar.extractfile(member))  # type: ignore[arg-type]
    if built_for != pin.cuda:
        tarball.unlink()
        raise UserError(
            f"{lock_path} pins {member.name}, built for CUDA "
            f"{built_for or 'none (cpu)'}, but the stack pins the {pin.variant} variant "
            f"(CUDA {pin.cuda})",
            where="validation.toolkit",
            hint="Regenerate the lock from the variant's own index (https://download.pytorch"
            f".org/whl/{pin.variant}) or a mirror of it: python -m imagectl.supply.lock toolkit",
        )
    return tarball
