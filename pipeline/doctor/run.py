"""Run every doctor check for one stack on one cloud: the checks that make no cloud call
(``offline``), then the cloud's account checks, which live in its folder, are
registered by its spec (``CloudSpec.doctor_module``: ``clouds/<cloud>/doctor.py``) and are
handed in by the caller (``imagectl.clouds.account.cloud_checks``): the doctor imports no
cloud."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from imagectl.core.errors import UserError
from imagectl.doctor.findings import Finding
from imagectl.doctor.offline import placeholders, runner
from imagectl.doctor.quota import QuotaApi
from imagectl.paths import Workspace
from imagectl.stacks import ResolvedStack, load_resolved


class AccountChecks(Protocol):
    """What a cloud's doctor module holds."""

    # environment variables that point its SDK at an emulator (then not a real cloud)
    ENDPOINT_ENV: tuple[str, ...]

    def connect(self, settings: Any) -> Any:
        """The cloud's clients for its stack section's settings."""

    def quota_api(self, clients: Any, settings: Any) -> QuotaApi[Any]:
        """How its quotas are read where the stack validates (``quota.quota_findings``)."""

    def diagnose(
        self,
        resolved: ResolvedStack,
        images: Path,
        roles: tuple[str, ...],
        *,
        hosts: int,
        settings: Any,
    ) -> list[Finding]: ...


def diagnose(
    ws: Workspace,
    stack: str,
    cloud: str,
    checks: AccountChecks | None,
    *,
    roles: tuple[str, ...],
    hosts: int,
    runner_cidr: str | None,
    packer: list[Finding] | None = None,
) -> list[Finding]:
    """Every finding, in order: the stack's placeholders, the runner's address, ``packer``
    (the caller's check of the Packer a build runs, ``imagectl.packer.plugins``, with the
    build role), then the cloud's account checks."""
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
    if "build" in roles:  # the packer the build runs, and its pinned plugins
        found += packer or []
    if checks is not None:
        found += checks.diagnose(resolved, ws.images, roles, hosts=hosts, settings=settings)
    return found
