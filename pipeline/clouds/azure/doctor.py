"""The account checks on Azure: the permissions API (Permissions - List For Resource
Group) at the build and gallery resource groups for each action of the roles' documents,
the Compute usage API for the vCPU family of each validation shape in the build location,
and the gallery (which must exist before a build: imagectl creates only the image
definition in it)."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from imagectl.clouds.azure.clients import AzureClients
from imagectl.clouds.azure.spec import SPEC as AZURE
from imagectl.clouds.azure.stack import AzureCloud
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.needs import DocumentFormat, permissions, quota
from imagectl.stacks import ResolvedStack


def _names(doc: Any) -> list[str]:
    """A role definition's Actions and DataActions (the permissions API lists both)."""
    return list(doc["Actions"]) + list(doc.get("DataActions", []))


FORMAT = DocumentFormat("json", _names)
ENDPOINT_ENV = ("IMAGECTL_AZURE_ENDPOINT",)

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
    try:
        usages = {u.name.value: u for u in clients.compute.usage.list(location)}
    except Exception as exc:  # refused, unparsable, unreachable: one finding naming the call
        usages = None
        out.append(
            Finding(
                "quota",
                WARNING,
                f"cannot read usage in {location} (Compute Usage - List): {_text(exc)}",
                "grant Microsoft.Compute/locations/usages/read",
            )
        )
    for shape in settings.validation_shapes:
        entry = quota(images, shape)
        if entry is None:
            out.append(
                Finding(
                    "quota",
                    WARNING,
                    f"no quota known for {shape}",
                    "add it to images/catalog/quotas.yaml",
                )
            )
            continue
        if usages is None:
            continue
        family, wanted = entry["family"], int(entry["vcpus"]) * hosts
        u = usages.get(family)
        free = (u.limit - u.current_value) if u is not None else 0
        if free < wanted:
            limit = u.limit if u is not None else 0
            out.append(
                Finding(
                    "quota",
                    BLOCKER,
                    f"{family} in {location}: {free} vCPUs free of "
                    f"{limit}; {hosts} x {shape} needs {wanted}",
                    f"request a quota increase for {family} in {location} (Azure "
                    "portal > Quotas > Compute)",
                )
            )
        else:
            out.append(
                Finding("quota", OK, f"{family} in {location}: {free} vCPUs free >= {wanted}")
            )

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
