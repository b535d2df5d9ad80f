"""Compact placement policies for multi-node validation runs (``imagectl.clouds.placement``).

Compute Engine: "About compact placement policies": a resource policy with
``groupPlacementPolicy.collocation: COLLOCATED`` places the VMs that name it close
together (low network latency); it is regional, the VMs name it in ``resourcePolicies``
(same region), and it cannot be deleted while a VM uses it. ``vmCount`` is the number of
VMs the policy holds (``resourcePolicies.insert``, REST reference:
GroupPlacementPolicy.vmCount, collocation COLLOCATED | UNSPECIFIED_COLLOCATION).

imagectl's marking (``description``): a resource policy has no labels. The Compute API
reference's ResourcePolicy resource has ``name``, ``description``, ``region``,
``creationTimestamp``, ``status`` and the policy kinds (``groupPlacementPolicy``...), but
no ``labels`` field, unlike an instance or an image. So the description carries what an
instance's labels carry: ``MARK``, then imagectl's tags (``imagectl:managed``,
``imagectl:expires-at``, ``imagectl:stack``...) as one JSON object, which ``marking``
reads back. Not the name's ``imagectl-`` prefix plus ``creationTimestamp`` plus a TTL:
the TTL is the run's (``validate-image --ttl``), which the reaper cannot know from the
stack, and a name prefix is no proof that imagectl made the policy; the description holds
the run's own TTL, and a policy without the marker is never touched.

Which instances use a policy is not in the policy (its ``resourceStatus`` says nothing of
them): each instance names its policies in ``resourcePolicies`` (instances.aggregatedList).
``resourcePolicies.delete`` of a policy a VM uses fails (400
``resourceInUseByAnotherResource``, "is already being used by"), a stopped (TERMINATED) VM
included, so every instance counts.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from imagectl.clouds.gcp import compute_sdk
from imagectl.clouds.placement import ManagedPlacement, Placement
from imagectl.tags import TAG_MANAGED

if TYPE_CHECKING:
    from imagectl.clouds.gcp.clients import GcpClients

KIND = "compact placement policy"
# how imagectl's policies start their description (then the shape, then the tags' JSON)
MARK = "imagectl placement"
_POLICY_URL = re.compile(r"regions/([^/]+)/resourcePolicies/([^/]+)$")


def description(shape: str, tags: dict[str, str]) -> str:
    """The policy's description: the marker, the shape, and imagectl's tags as JSON."""
    marking = json.dumps(tags, sort_keys=True, separators=(",", ":"))
    return f"{MARK}: multi-node validation of {shape} {marking}"


def marking(text: str) -> dict[str, str] | None:
    """The tags a description written by ``description`` carries; None for any other
    description (a policy imagectl did not make, or whose marking is not readable)."""
    start = text.find("{")
    if not text.startswith(MARK + ":") or start < 0:
        return None
    try:
        tags = json.loads(text[start:])
    except ValueError:
        return None
    if not isinstance(tags, dict) or tags.get(TAG_MANAGED) != "true":
        return None
    return {str(k): str(v) for k, v in tags.items()}


def region_of(location: str) -> str:
    """``us-central1-a`` -> ``us-central1`` (a region stays itself)."""
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) > 2 else location


def create(clients: GcpClients, project: str, *, name: str, location: str, count: int,
           description: str) -> Placement:  # fmt: skip
    compute_v1 = compute_sdk.compute_v1()

    region = region_of(location)
    policy = compute_v1.ResourcePolicy(
        name=name,
        description=description,
        group_placement_policy=compute_v1.ResourcePolicyGroupPlacementPolicy(
            collocation="COLLOCATED", vm_count=count
        ),
    )
    op = clients.resource_policies.insert(
        project=project, region=region, resource_policy_resource=policy, retry=clients.retry
    )
    clients.wait(op, region=region)
    url = f"projects/{project}/regions/{region}/resourcePolicies/{name}"
    return Placement("gcp", KIND, name, region, url)


def delete(clients: GcpClients, project: str, placement: Placement) -> None:
    from google.api_core import exceptions

    try:
        op = clients.resource_policies.delete(
            project=project, region=placement.location, resource_policy=placement.name,
            retry=clients.retry,
        )  # fmt: skip
    except exceptions.NotFound:
        return
    clients.wait(op, region=placement.location)


def _users(clients: GcpClients, project: str) -> dict[tuple[str, str], list[str]]:
    """(region, policy name) -> the instances naming it, in any status."""
    compute_v1 = compute_sdk.compute_v1()

    request = compute_v1.AggregatedListInstancesRequest(project=project)
    users: dict[tuple[str, str], list[str]] = {}
    for _scope, scoped in clients.instances.aggregated_list(request=request, retry=clients.retry):
        for inst in scoped.instances:
            for url in inst.resource_policies:
                match = _POLICY_URL.search(str(url))
                if match:
                    users.setdefault((match.group(1), match.group(2)), []).append(inst.name)
    return users


def list_managed(clients: GcpClients, project: str) -> list[ManagedPlacement]:
    """Every region's policies marked by imagectl (resourcePolicies.aggregatedList, its
    pages followed by the client's pager), with the instances each holds."""
    compute_v1 = compute_sdk.compute_v1()

    request = compute_v1.AggregatedListResourcePoliciesRequest(project=project)
    marked: list[tuple[str, Any, dict[str, str]]] = []
    for scope, scoped in clients.resource_policies.aggregated_list(
        request=request, retry=clients.retry
    ):
        for raw in scoped.resource_policies:
            tags = marking(raw.description or "")
            if tags is not None:
                region = (raw.region or scope).rsplit("/", 1)[-1]
                marked.append((region, raw, tags))
    if not marked:
        return []
    users = _users(clients, project)
    out = []
    for region, raw, tags in marked:
        url = f"projects/{project}/regions/{region}/resourcePolicies/{raw.name}"
        members = tuple(users.get((region, raw.name), ()))
        out.append(ManagedPlacement(Placement("gcp", KIND, raw.name, region, url), tags, members))
    return out
