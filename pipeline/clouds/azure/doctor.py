"""The account checks on Azure: the permissions API (Permissions - List For Resource
Group) at the build and gallery resource groups for each action of the roles' documents,
the Compute usage API for the vCPU family of each validation shape in the build location,
and the gallery (which must exist before a build: imagectl creates only the image
definition in it)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeAlias

from imagectl.clouds.azure.clients import AzureClients
from imagectl.clouds.azure.spec import SPEC as AZURE
from imagectl.clouds.azure.stack import AzureCloud
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.needs import DocumentFormat, permissions
from imagectl.doctor.quota import Quota, quota_findings
from imagectl.stacks import ResolvedStack


def _names(doc: Any) -> list[str]:
    """A role definition's Actions and DataActions (the permissions API lists both)."""
    return list(doc["Actions"]) + list(doc.get("DataActions", []))


FORMAT = DocumentFormat("json", _names)
ENDPOINT_ENV = ("IMAGECTL_AZURE_ENDPOINT",)

# a location and its usages by vCPU family (Compute Usage - List), or why they cannot be read
LocationUsages: TypeAlias = "tuple[str, dict[str, Any]] | Finding"

PERMISSIONS_API = "2022-04-01"


def _text(exc: Exception) -> str:
    return str(getattr(exc, "message", "") or exc).splitlines()[0][:200]


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


def check(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, clients: Any
) -> list[Finding]:
    from azure.core.exceptions import ResourceNotFoundError

    settings = resolved.stack.clouds.section_of(AzureCloud)
    assert settings is not None  # doctor.run checked the stack targets azure
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
                f"{sub}: {_text(exc)}",
                "run `az login` (or configure a federated credential) and check "
                "clouds.azure.build.subscription_id",
            ),
        ]
    out.append(Finding("credentials", OK, f"Azure subscription {sub} answers"))
    needed = permissions(images, AZURE.name, roles, FORMAT)
    missing = [n for n in needed if not _holds(n.permission, allowed, denied)]
    for n in missing:
        out.append(
            Finding(
                "permissions",
                BLOCKER,
                f"the caller may not {n.permission} in {', '.join(groups)}",
                f"add it from {n.document}",
            )
        )
    if not missing:
        out.append(
            Finding("permissions", OK, f"all {len(needed)} actions of {', '.join(roles)} allowed")
        )

    location = settings.build.location
    usages = location_usages(clients, location)
    out += quota_findings(images, settings.validation_shapes, hosts, partial(read_quota, usages))

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
                f"{g.name} --location {location}",
            )
        )
    except Exception as exc:  # refused, unparsable, unreachable: one finding naming the call
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"cannot read gallery {g.name} (Compute Galleries - Get): {_text(exc)}",
                "grant Microsoft.Compute/galleries/read",
            )
        )
    return out


def location_usages(clients: Any, location: str) -> LocationUsages:
    """The location's vCPU family usages by name, with the location (Compute Usage - List),
    or the warning that they cannot be read."""
    try:
        usages = {u.name.value: u for u in clients.compute.usage.list(location)}
    except Exception as exc:  # refused, unparsable, unreachable: one finding naming the call
        return Finding(
            "quota",
            WARNING,
            f"cannot read usage in {location} (Compute Usage - List): {_text(exc)}",
            "grant Microsoft.Compute/locations/usages/read",
        )
    return location, usages


def read_quota(usages: LocationUsages, entry: Mapping[str, Any], hosts: int) -> Quota | Finding:
    """The vCPU family quota a shape counts against in the location (limit and use)."""
    if isinstance(usages, Finding):
        return usages
    location, by_family = usages
    family, wanted = entry["family"], int(entry["vcpus"]) * hosts
    u = by_family.get(family)
    return Quota(
        label=f"{family} in {location}",
        wanted=wanted,
        free=(u.limit - u.current_value) if u is not None else 0,
        limit=u.limit if u is not None else 0,
        unit=" vCPUs",
        increase=f"request a quota increase for {family} in {location} (Azure portal > "
        "Quotas > Compute)",
    )


def diagnose(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, settings: Any
) -> list[Finding]:
    """The account checks with this cloud's clients, built from the stack's settings."""
    return check(
        resolved,
        images,
        roles,
        hosts=hosts,
        clients=AzureClients(subscription_id=settings.build.subscription_id, retry_total=1),
    )
