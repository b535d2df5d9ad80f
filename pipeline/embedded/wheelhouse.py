"""The validator's dependency wheels for the local build, as one tarball.

The validator role installs imagectl into /opt/imagectl in the image from a wheelhouse
the controller made, on every cloud (``imagectl.supply.validator``): the wheels
``validators/requirements.lock`` pins with their sha256, for the guest's Python (Debian
12: CPython 3.11, manylinux x86_64), installed with ``--no-index --require-hashes``.
"""

from __future__ import annotations

from pathlib import Path

from imagectl.supply.validator import ensure_validator_wheelhouse

GUEST_PYTHON = "3.11"  # Debian 12's python3


def ensure_wheelhouse() -> Path:
    """The locked dependency wheels for the local guest (cached, checked before reuse)."""
    return ensure_validator_wheelhouse(GUEST_PYTHON)
