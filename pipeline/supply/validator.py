"""The validator's dependency wheelhouse: every wheel imagectl needs on the image, as
``validators/requirements.lock`` pins it, for the image's Python (every cloud and the
local build alike)."""

from __future__ import annotations

from pathlib import Path

from imagectl.paths import state_dir
from imagectl.supply.lock import validator_lock_path
from imagectl.supply.targets import PLATFORMS
from imagectl.supply.wheelhouse import ensure_wheelhouse


def ensure_validator_wheelhouse(
    python: str, *, folder: Path | None = None, lock: Path | None = None
) -> Path:
    """``<state>/wheelhouse/validator/<key>.tar``: the locked wheels for ``python`` and the
    lock the validator role installs them from (``--no-index --require-hashes``)."""
    return ensure_wheelhouse(
        lock or validator_lock_path(),
        python=python,
        platforms=PLATFORMS,
        folder=folder or state_dir() / "wheelhouse" / "validator",
        what="validator's dependency wheels",
    )
