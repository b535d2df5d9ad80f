"""A cloud's account checks, found through its spec (``CloudSpec.doctor_module``:
``clouds/<cloud>/doctor.py``). The clouds hand their checks to the doctor, which never
imports the clouds (the dependency runs clouds -> doctor, as it runs clouds -> stacks)."""

from __future__ import annotations

import importlib
import ipaddress
import os
from typing import cast
from urllib.parse import urlsplit

from imagectl.clouds.registry import cloud_spec
from imagectl.doctor.run import AccountChecks


def cloud_checks(cloud: str) -> AccountChecks | None:
    """The cloud's account checks (its spec's ``doctor_module``), or None for a cloud with
    no account (the local one)."""
    name = cloud_spec(cloud).doctor_module
    return cast(AccountChecks, importlib.import_module(name)) if name else None


def _on_this_machine(url: str) -> bool:
    """The endpoint's host is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def emulator_endpoint(cloud: str) -> str | None:
    """The emulator the cloud's SDK is pointed at, or None where it talks to the real
    cloud: an endpoint override (the cloud's ``ENDPOINT_ENV``) whose host is this machine's
    loopback, as the emulators (moto, the test fakes, ``imagectl.clouds.aws.sandbox``)
    listen. An override naming any other host (a FIPS or VPC endpoint, a proxy) reaches a
    real account, so it is no emulator. The one test of "emulated" for the preflight, for
    ``validate-image --sandbox``, for the promotion gate and for the attestation."""
    checks = cloud_checks(cloud)
    names = checks.ENDPOINT_ENV if checks is not None else ()
    urls = [u for u in (os.environ.get(n, "").strip() for n in names) if u]
    return urls[0] if urls and all(_on_this_machine(u) for u in urls) else None


def real_cloud(cloud: str) -> bool:
    """True where the cloud has an account (a remote cloud) and its SDK is not pointed at
    an emulator on this machine (``emulator_endpoint``)."""
    return cloud_spec(cloud).remote and emulator_endpoint(cloud) is None


def endpoint_env(cloud: str) -> str:
    """The variable that points ``cloud``'s SDK at an emulator (for messages)."""
    checks = cloud_checks(cloud)
    names = checks.ENDPOINT_ENV if checks is not None else ()
    return names[0] if names else "(none: the cloud has no account)"
