"""A cloud's account checks, found through its spec (``CloudSpec.doctor_module``:
``clouds/<cloud>/doctor.py``). The clouds hand their checks to the doctor, which never
imports the clouds (the dependency runs clouds -> doctor, as it runs clouds -> stacks)."""

from __future__ import annotations

import importlib
import os
from typing import cast

from imagectl.clouds.registry import cloud_spec
from imagectl.doctor.run import AccountChecks


def cloud_checks(cloud: str) -> AccountChecks | None:
    """The cloud's account checks (its spec's ``doctor_module``), or None for a cloud with
    no account (the local one)."""
    name = cloud_spec(cloud).doctor_module
    return cast(AccountChecks, importlib.import_module(name)) if name else None


def real_cloud(cloud: str) -> bool:
    """True unless an endpoint override points the cloud's SDK at an emulator."""
    checks = cloud_checks(cloud)
    names: tuple[str, ...] = checks.ENDPOINT_ENV if checks is not None else ()
    return not any(os.environ.get(name) for name in names)
