"""Run every doctor check for one stack on one cloud."""

from __future__ import annotations

import os

from imagectl.clouds.aws.clients import AwsClients
from imagectl.clouds.azure.clients import AzureClients
from imagectl.clouds.gcp.clients import GcpClients
from imagectl.doctor import aws, azure, gcp
from imagectl.doctor.findings import Finding
from imagectl.doctor.offline import placeholders, runner
from imagectl.errors import UserError
from imagectl.paths import Workspace
from imagectl.stacks import load_resolved

ENDPOINTS = {
    "aws": ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL"),
    "gcp": ("IMAGECTL_GCP_ENDPOINT",),
    "azure": ("IMAGECTL_AZURE_ENDPOINT",),
}


def real_cloud(cloud: str) -> bool:
    """True unless an endpoint override points the cloud's SDK at an emulator."""
    return not any(os.environ.get(name) for name in ENDPOINTS.get(cloud, ()))


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
    if cloud == "aws":
        clients = AwsClients(region=settings.build.region)
        found += aws.check(resolved, ws.images, roles, hosts=hosts, clients=clients)
    elif cloud == "gcp":
        gclients = GcpClients(project=settings.build.project)
        found += gcp.check(resolved, ws.images, roles, hosts=hosts, clients=gclients)
    else:
        aclients = AzureClients(subscription_id=settings.build.subscription_id, retry_total=1)
        found += azure.check(resolved, ws.images, roles, hosts=hosts, clients=aclients)
    return found
