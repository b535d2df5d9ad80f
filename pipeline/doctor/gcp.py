"""The account checks on Google Cloud: projects.testIamPermissions (Resource Manager) for
each permission of the roles' documents, regions.get ``quotas`` for the GPU quota of each
validation shape in the validation zone's region, reservations.get for a named
reservation, and images.getFromFamily for the family the promotion writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imagectl.clouds.gcp.clients import GcpClients
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.needs import DocumentFormat, permissions, quota
from imagectl.stacks import ResolvedStack


def _names(doc: Any) -> list[str]:
    """A custom role's includedPermissions."""
    return list(doc["includedPermissions"])


FORMAT = DocumentFormat("yaml", _names)
ENDPOINT_ENV = ("IMAGECTL_GCP_ENDPOINT",)

RESOURCE_MANAGER = "https://cloudresourcemanager.googleapis.com"


def _text(exc: Exception) -> str:
    return str(getattr(exc, "message", "") or exc).splitlines()[0][:200]


def test_permissions(clients: Any, project: str, names: list[str]) -> list[str]:
    """The subset of ``names`` the caller holds on ``project`` (at most 100 a call)."""
    from google.auth.transport.requests import AuthorizedSession

    base = clients.endpoint or RESOURCE_MANAGER
    credentials = clients.credentials
    if credentials is None:
        import google.auth

        credentials, _ = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
    session = AuthorizedSession(credentials)
    held: list[str] = []
    for start in range(0, len(names), 100):
        resp = session.post(
            f"{base}/v1/projects/{project}:testIamPermissions",
            json={"permissions": names[start : start + 100]},
            timeout=clients.deadlines.read_s,
        )
        resp.raise_for_status()
        held += list(resp.json().get("permissions", []))
    return held


def check(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, clients: Any
) -> list[Finding]:
    from google.api_core import exceptions as gexc

    settings = resolved.stack.clouds.gcp
    assert settings is not None  # doctor.run checked the stack targets gcp
    project = settings.build.project
    out: list[Finding] = []
    needed = permissions(images, "gcp", roles, FORMAT)
    try:
        held = set(test_permissions(clients, project, [n.permission for n in needed]))
    except Exception as exc:  # no credentials, no project, no network: one line, blocker
        return [
            Finding(
                "credentials",
                BLOCKER,
                f"cannot ask Google Cloud for {project}'s permissions: {_text(exc)}",
                "run `gcloud auth application-default login` (or configure workload "
                "identity federation) and check clouds.gcp.build.project",
            )
        ]
    out.append(Finding("credentials", OK, f"Google Cloud project {project} answers"))
    missing = [n for n in needed if n.permission not in held]
    for n in missing:
        out.append(
            Finding(
                "permissions",
                BLOCKER,
                f"the caller lacks {n.permission} on {project}",
                f"add it from {n.document}",
            )
        )
    if not missing:
        out.append(
            Finding("permissions", OK, f"all {len(needed)} permissions of {', '.join(roles)} held")
        )

    capacity = settings.validation_capacity
    zone = capacity.zone if capacity is not None else settings.build.zone
    region = zone.rsplit("-", 1)[0]
    try:
        quotas = {q.metric: q for q in clients.regions.get(project=project, region=region).quotas}
    except gexc.GoogleAPICallError as exc:
        quotas = None
        out.append(
            Finding(
                "quota",
                WARNING,
                f"cannot read {region}'s quotas: {_text(exc)}",
                "grant compute.regions.get",
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
        if quotas is None:
            continue
        metric, wanted = entry["metric"], int(entry["gpus"]) * hosts
        q = quotas.get(metric)
        free = (q.limit - q.usage) if q is not None else 0.0
        if free < wanted:
            limit = q.limit if q is not None else 0
            out.append(
                Finding(
                    "quota",
                    BLOCKER,
                    f"{metric} in {region}: {free:g} free of "
                    f"{limit:g}; {hosts} x {shape} needs {wanted}",
                    f"request a quota increase for {metric} in {region} (IAM & "
                    "Admin > Quotas, or gcloud beta quotas preferences create)",
                )
            )
        else:
            out.append(Finding("quota", OK, f"{metric} in {region}: {free:g} free >= {wanted}"))

    if capacity is not None:
        name = capacity.reservation.rsplit("/", 1)[-1]
        try:
            res = clients.reservations.get(project=project, zone=capacity.zone, reservation=name)
        except gexc.NotFound:
            out.append(
                Finding(
                    "capacity",
                    BLOCKER,
                    f"reservation {name} not found in {capacity.zone}",
                    "create it (gcloud compute reservations "
                    "create) or remove clouds.gcp.validation_capacity",
                )
            )
        else:
            props = res.specific_reservation
            free = int(props.count) - int(props.in_use_count)
            status = OK if free >= hosts else BLOCKER
            out.append(
                Finding(
                    "capacity",
                    status,
                    f"reservation {name}: {free} free of {props.count}",
                    "" if status == OK else "enlarge it or wait",
                )
            )

    family = settings.family or resolved.name
    try:
        clients.images.get_from_family(project=project, family=family)
        out.append(Finding("resources", OK, f"image family {family} exists in {project}"))
    except gexc.NotFound:
        out.append(
            Finding(
                "resources",
                OK,
                f"image family {family} is free in {project} (the first promotion creates it)",
            )
        )
    except gexc.GoogleAPICallError as exc:
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"cannot read image family {family}: {_text(exc)}",
                "grant compute.images.getFromFamily",
            )
        )
    return out


def diagnose(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, settings: Any
) -> list[Finding]:
    """The account checks with this cloud's clients, built from the stack's settings."""
    return check(
        resolved, images, roles, hosts=hosts, clients=GcpClients(project=settings.build.project)
    )
