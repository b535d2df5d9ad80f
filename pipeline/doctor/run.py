"""Run every doctor check for one stack on one cloud: the checks that make no cloud call
(``offline``), then the cloud's account checks, which live in its folder and are
registered by its spec (``CloudSpec.doctor_module``: ``clouds/<cloud>/doctor.py``)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Protocol, cast

from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import UserError
from imagectl.doctor.findings import Finding
from imagectl.doctor.offline import placeholders, runner
from imagectl.paths import Workspace
from imagectl.stacks import ResolvedStack, load_resolved


class AccountChecks(Protocol):
    """What a cloud's doctor module holds."""

    # environment variables that point its SDK at an emulator (then not a real cloud)
    ENDPOINT_ENV: tuple[str, ...]

    def diagnose(
        self,
        resolved: ResolvedStack,
        images: Path,
        roles: tuple[str, ...],
        *,
        hosts: int,
        settings: Any,
    ) -> list[Finding]: ...


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


def diagnose(
    ws: Workspace,
    stack: str,
    cloud: str,
    *,
    roles: tuple[str, ...],
    hosts: int,
    runner_cidr: str | None,
) -> list[Finding]:
    _, resolved = load_resolved(ws.images, stack)
    settings = resolved.stack.clouds.section(cloud)
    if settings is None:
        raise UserError(
            f"stack {stack} does not target {cloud}",
            hint=f"Check images/stacks/{stack}.yaml's clouds, or pick one of its clouds",
        )
    found = placeholders(resolved, ws.compat_dir, cloud, strict=True)
    needs_runner = "validate" in roles
    found += runner(runner_cidr, required=needs_runner, real=True)
    checks = cloud_checks(cloud)
    if checks is not None:
        found += checks.diagnose(resolved, ws.images, roles, hosts=hosts, settings=settings)
    return found
