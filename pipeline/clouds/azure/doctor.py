"""The account checks on Azure: the permissions API (Permissions - List For Resource
Group) at the build and gallery resource groups for each action of the roles' documents,
the Compute usage API for the vCPU family of each validation shape in the build location,
and the gallery (which must exist before a build: imagectl creates only the image
definition in it)."""

from __future__ import annotations

import fnmatch
from functools import partial
from pathlib import Path
from typing import Any

from imagectl.clouds.azure.clients import AzureClients
from imagectl.clouds.azure.spec import SPEC as AZURE
from imagectl.clouds.azure.stack import AzureCloud
from imagectl.doctor.findings import BLOCKER, OK, Finding, error_text
from imagectl.doctor.needs import DocumentFormat, permission_findings, permissions
from imagectl.doctor.quota import QuotaApi, Reported, quota_findings
from imagectl.stacks import ResolvedStack


def _names(doc: Any) -> list[str]:
    """A role definition's Actions and DataActions (the permissions API lists both)."""
    return list(doc["Actions"]) + list(doc.get("DataActions", []))


FORMAT = DocumentFormat("json", _names)
ENDPOINT_ENV = ("IMAGECTL_AZURE_ENDPOINT",)

PERMISSIONS_API = "2022-04-01"


def held_actions(clients: Any, rg: str) -> tuple[list[str], list[str]] | None:
    """(allowed patterns, denied patterns) of the caller at resource group ``rg``; None
    when the group does not exist."""
    from azure.core.rest import HttpRequest

    url = (
        f"/subscriptions/{clients.subscription_id}/resourceGroups/{rg}/providers/"
        f"Microsoft.Authorization/permissions?api-version={PERMISSIONS_API}"
    )
    allowed: list[str] = []
    denied: list[str] = []
    while url:
        resp = clients.compute.send_request(HttpRequest("GET", url))
        if resp.status_code == 404:
            return None
        if resp.status_code >= 400:
            raise RuntimeError(
                f"the permissions API answered {resp.status_code}: {resp.text()[:200]}"
            )
        body = resp.json()
        for p in body.get("value", []):
            allowed += list(p.get("actions", [])) + list(p.get("dataActions", []))
            denied += list(p.get("notActions", [])) + list(p.get("notDataActions", []))
        url = body.get("nextLink") or ""
    return allowed, denied


def _holds(action: str, allowed: list[str], denied: list[str]) -> bool:
    def hit(patterns: list[str]) -> bool:
        return any(fnmatch.fnmatch(action.lower(), p.lower()) for p in patterns)

    return hit(allowed) and not hit(denied)


def diagnose(
    resolved: ResolvedStack,
    images: Path,
    roles: tuple[str, ...],
    *,
    hosts: int,
    settings: AzureCloud,
) -> list[Finding]:
    from azure.core.exceptions import ResourceNotFoundError

    clients = connect(settings)
    sub = settings.build.subscription_id
    groups = dict.fromkeys([settings.build.resource_group, settings.gallery.resource_group])
    out: list[Finding] = []
    allowed: list[str] = []
    denied: list[str] = []
    try:
        for rg in groups:
            got = held_actions(clients, rg)
            if got is None:
                out.append(
                    Finding(
                        "resources",
                        BLOCKER,
                        f"resource group {rg} does not exist in subscription {sub}",
                        f"az group create --name {rg} --location {settings.build.location}",
                    )
                )
                continue
            allowed += got[0]
            denied += got[1]
    except Exception as exc:  # credentials, network, a refused subscription: one blocker
        return [
            *out,
            Finding(
                "credentials",
                BLOCKER,
                f"cannot ask Azure for the caller's permissions in subscription "
                f"{sub}: {error_text(exc)}",
                "run `az login` (or configure a federated credential) and check "
                "clouds.azure.build.subscription_id",
            ),
        ]
    out.append(Finding("credentials", OK, f"Azure subscription {sub} answers"))
    needed = permissions(images, AZURE.name, roles, FORMAT)
    out += permission_findings(
        needed,
        lambda p: _holds(p, allowed, denied),
        lambda p: f"the caller may not {p} in {', '.join(groups)}",
        f"all {len(needed)} actions of {', '.join(roles)} allowed",
    )

    out += quota_findings(images, settings.validation_shapes, hosts, quota_api(clients, settings))

    g = settings.gallery
    try:
        clients.compute.galleries.get(g.resource_group, g.name)
        out.append(Finding("resources", OK, f"gallery {g.name} exists in {g.resource_group}"))
    except ResourceNotFoundError:
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"gallery {g.name} does not exist in "
                f"{g.resource_group} (imagectl creates only the image definition)",
                f"az sig create --resource-group {g.resource_group} --gallery-name "
                f"{g.name} --location {settings.build.location}",
            )
        )
    except Exception as exc:  # refused, unparsable, unreachable: one finding naming the call
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"cannot read gallery {g.name} (Compute Galleries - Get): {error_text(exc)}",
                "grant Microsoft.Compute/galleries/read",
            )
        )
    return out


def location_usages(clients: Any, location: str) -> dict[str, tuple[float, float]]:
    """(limit, current value) of each vCPU family in the location (Compute Usage - List)."""
    return {u.name.value: (u.limit, u.current_value) for u in clients.compute.usage.list(location)}


def _refused(exc: Exception) -> bool:
    """ARM's 403 (``AuthorizationFailed``: the caller may not perform the action)."""
    return getattr(exc, "status_code", None) == 403


def quota_api(clients: Any, settings: AzureCloud) -> QuotaApi[dict[str, tuple[float, float]]]:
    """Compute Usage - List in the build location, read once for every shape."""
    return QuotaApi(
        where=settings.build.location,
        call="Compute Usage - List",
        permission="Microsoft.Compute/locations/usages/read",
        read=partial(location_usages, clients),
        # the vCPU family a shape counts against in the location (limit and use)
        quota=Reported(
            "family",
            "vcpus",
            "request a quota increase for {name} in {where} (Azure portal > Quotas > Compute)",
            unit=" vCPUs",
        ),
        refused=_refused,
    )


def connect(settings: AzureCloud) -> AzureClients:
    """This cloud's clients for the stack's settings."""
    return AzureClients(subscription_id=settings.build.subscription_id, retry_total=1)
