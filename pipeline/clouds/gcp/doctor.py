"""The account checks on Google Cloud: projects.testIamPermissions (Resource Manager) for
each permission of the roles' documents, regions.get ``quotas`` for the GPU quota of each
validation shape in the validation zone's region, reservations.get for a named
reservation, and images.getFromFamily for the family the promotion writes."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from imagectl.clouds.gcp.clients import GcpClients
from imagectl.clouds.gcp.spec import SPEC as GCP
from imagectl.clouds.gcp.stack import GcpCloud
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding, error_text
from imagectl.doctor.needs import DocumentFormat, permission_findings, permissions
from imagectl.doctor.quota import QuotaApi, Reported, quota_findings
from imagectl.stacks import ResolvedStack


def _names(doc: Any) -> list[str]:
    """A custom role's includedPermissions."""
    return list(doc["includedPermissions"])


FORMAT = DocumentFormat("yaml", _names)
ENDPOINT_ENV = ("IMAGECTL_GCP_ENDPOINT",)

RESOURCE_MANAGER = "https://cloudresourcemanager.googleapis.com"


def _session(clients: Any) -> Any:
    from google.auth.transport.requests import AuthorizedSession

    credentials = clients.credentials
    if credentials is None:
        import google.auth

        credentials, _ = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
    return AuthorizedSession(credentials)


def test_permissions(clients: Any, project: str, names: list[str]) -> list[str]:
    """The subset of ``names`` the caller holds on ``project`` (at most 100 a call)."""
    base = clients.endpoint or RESOURCE_MANAGER
    session = _session(clients)
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


OS_LOGIN = "constraints/compute.requireOsLogin"
LOCATIONS = "constraints/gcp.resourceLocations"


def effective_policy(clients: Any, project: str, constraint: str) -> dict[str, Any]:
    """The project's effective organization policy for ``constraint`` (Resource Manager
    v1 ``projects.getEffectiveOrgPolicy``; needs ``orgpolicy.policy.get``)."""
    base = clients.endpoint or RESOURCE_MANAGER
    resp = _session(clients).post(
        f"{base}/v1/projects/{project}:getEffectiveOrgPolicy",
        json={"constraint": constraint},
        timeout=clients.deadlines.read_s,
    )
    resp.raise_for_status()
    return dict(resp.json())


def _org_policies(clients: Any, settings: Any, project: str) -> list[Finding]:
    """The organization policies that decide whether a run can work at all, read before
    any spend: ``compute.requireOsLogin`` (metadata ``ssh-keys``, the run's key, are then
    ignored: "About OS Login") and ``gcp.resourceLocations`` (where resources may be
    created: the build and validation zones, the image's storage locations)."""
    out: list[Finding] = []
    fix = "grant orgpolicy.policy.get (images/permissions/gcp/build.yaml)"
    try:
        os_login = effective_policy(clients, project, OS_LOGIN)
        locations = effective_policy(clients, project, LOCATIONS)
    except Exception as exc:
        return [
            Finding(
                "resources",
                WARNING,
                f"cannot read {project}'s organization policies (Resource Manager "
                f"getEffectiveOrgPolicy): {error_text(exc)}",
                fix,
            )
        ]
    if (os_login.get("booleanPolicy") or {}).get("enforced"):
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"the organization policy compute.requireOsLogin is enforced on {project}: "
                "validation instances ignore metadata ssh-keys, so the run cannot log in",
                "exempt the project (an organization policy override of "
                "constraints/compute.requireOsLogin, not enforced), or validate in a project "
                "where OS Login is not required",
            )
        )
    else:
        out.append(Finding("resources", OK, "OS Login is not required by organization policy"))
    capacity = settings.validation_capacity
    zones = {settings.build.zone, capacity.zone if capacity is not None else settings.build.zone}
    wanted = sorted(zones | {z.rsplit("-", 1)[0] for z in zones} | set(settings.regions))
    refused, undecided = _locations(locations.get("listPolicy") or {}, wanted)
    if refused:
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"the organization policy gcp.resourceLocations does not allow "
                f"{', '.join(refused)} in {project}",
                "choose allowed zones and storage locations in clouds.gcp, or ask for the "
                "policy to allow them",
            )
        )
    if undecided:
        out.append(
            Finding(
                "resources",
                WARNING,
                f"cannot decide whether gcp.resourceLocations allows {', '.join(undecided)}: "
                f"it allows value groups ({', '.join(undecided_groups(locations))}) doctor "
                "does not expand",
                "check them in the console (IAM & Admin > Organization policies)",
            )
        )
    if not refused and not undecided:
        out.append(Finding("resources", OK, f"{', '.join(wanted)} allowed by organization policy"))
    return out


def _plain(value: str) -> str:
    """A location value without its kind prefix (``zones:us-central1-a``)."""
    return value.split(":", 1)[1] if ":" in value and not value.startswith("in:") else value


def undecided_groups(policy: dict[str, Any]) -> list[str]:
    listed = (policy.get("listPolicy") or {}).get("allowedValues") or []
    return [v for v in listed if str(v).startswith("in:")]


def _locations(listed: dict[str, Any], wanted: list[str]) -> tuple[list[str], list[str]]:
    """(refused, undecided) of ``wanted`` under a ``gcp.resourceLocations`` list policy:
    ``allValues: DENY`` refuses all, a denied value refuses it, an allowed list admits only
    what it names (a value group, ``in:...``, is not expanded: undecided)."""
    if listed.get("allValues") == "DENY":
        return wanted, []
    denied = {_plain(str(v)) for v in listed.get("deniedValues") or []}
    allowed = [str(v) for v in listed.get("allowedValues") or []]
    refused = [w for w in wanted if w in denied]
    if not allowed or listed.get("allValues") == "ALLOW":
        return refused, []
    plain = {_plain(v) for v in allowed if not v.startswith("in:")}
    groups = [v for v in allowed if v.startswith("in:")]
    rest = [w for w in wanted if w not in refused and w not in plain]
    if groups:
        return refused, rest
    return refused + rest, []


def diagnose(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, settings: GcpCloud
) -> list[Finding]:
    from google.api_core import exceptions as gexc

    clients = connect(settings)
    project = settings.build.project
    out: list[Finding] = []
    needed = permissions(images, GCP.name, roles, FORMAT)
    try:
        held = set(test_permissions(clients, project, [n.permission for n in needed]))
    except Exception as exc:  # no credentials, no project, no network: one line, blocker
        return [
            Finding(
                "credentials",
                BLOCKER,
                f"cannot ask Google Cloud for {project}'s permissions: {error_text(exc)}",
                "run `gcloud auth application-default login` (or configure workload "
                "identity federation) and check clouds.gcp.build.project",
            )
        ]
    out.append(Finding("credentials", OK, f"Google Cloud project {project} answers"))
    out += _org_policies(clients, settings, project)
    out += permission_findings(
        needed,
        held.__contains__,
        lambda p: f"the caller lacks {p} on {project}",
        f"all {len(needed)} permissions of {', '.join(roles)} held",
    )

    out += quota_findings(images, settings.validation_shapes, hosts, quota_api(clients, settings))

    capacity = settings.validation_capacity

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
        except Exception as exc:  # refused, unparsable, unreachable: one finding
            out.append(
                Finding(
                    "capacity",
                    BLOCKER,
                    f"cannot read reservation {name} (Compute reservations.get): {error_text(exc)}",
                    "grant compute.reservations.get, check the endpoint and the network",
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
    except Exception as exc:  # refused, unparsable, unreachable: one finding naming the call
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"cannot read image family {family} (Compute images.getFromFamily): "
                f"{error_text(exc)}",
                "grant compute.images.getFromFamily",
            )
        )
    return out


def region_quotas(clients: Any, project: str, region: str) -> dict[str, tuple[float, float]]:
    """The region's quotas, (limit, usage) by metric (Compute regions.get ``quotas``)."""
    found = clients.regions.get(project=project, region=region).quotas
    return {q.metric: (q.limit, q.usage) for q in found}


def _refused(exc: Exception) -> bool:
    """Compute's 403 (``forbidden``: "Required 'compute.regions.get' permission")."""
    return getattr(exc, "code", None) == 403


def quota_api(clients: Any, settings: GcpCloud) -> QuotaApi[dict[str, tuple[float, float]]]:
    """Compute regions.get in the validation zone's region, read once for every shape."""
    capacity = settings.validation_capacity
    zone = capacity.zone if capacity is not None else settings.build.zone
    return QuotaApi(
        where=zone.rsplit("-", 1)[0],
        call="Compute regions.get",
        permission="compute.regions.get",
        read=partial(region_quotas, clients, settings.build.project),
        # the GPU quota a shape counts against in the region (limit and usage)
        quota=Reported(
            "metric",
            "gpus",
            "request a quota increase for {name} in {where} (IAM & Admin > "
            "Quotas, or gcloud beta quotas preferences create)",
        ),
        refused=_refused,
    )


def connect(settings: GcpCloud) -> GcpClients:
    """This cloud's clients for the stack's settings."""
    return GcpClients(project=settings.build.project)
