"""Run every doctor check for one stack on one cloud."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from imagectl.core.errors import UserError
from imagectl.doctor.findings import Finding
from imagectl.doctor.offline import placeholders, runner
from imagectl.paths import Workspace
from imagectl.stacks import load_resolved


def cloud_checks(cloud: str) -> ModuleType | None:
    """The cloud's account checks (``imagectl.doctor.<cloud>``: FORMAT, ENDPOINT_ENV,
    diagnose), or None for a cloud with no account (the local one)."""
    name = f"imagectl.doctor.{cloud}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the module is there; something it imports is not
            raise
        return None


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
    settings = getattr(resolved.stack.clouds, cloud, None)
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
