"""Compact placement policies for multi-node validation runs (``imagectl.clouds.placement``).

Compute Engine: "About compact placement policies": a resource policy with
``groupPlacementPolicy.collocation: COLLOCATED`` places the VMs that name it close
together (low network latency); it is regional, the VMs name it in ``resourcePolicies``
(same region), and it cannot be deleted while a VM uses it. ``vmCount`` is the number of
VMs the policy holds (``resourcePolicies.insert``, REST reference:
GroupPlacementPolicy.vmCount, collocation COLLOCATED | UNSPECIFIED_COLLOCATION).
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.placement import Placement

KIND = "compact placement policy"


def region_of(location: str) -> str:
    """``us-central1-a`` -> ``us-central1`` (a region stays itself)."""
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) > 2 else location


def create(clients: Any, project: str, *, name: str, location: str, count: int,
           description: str) -> Placement:  # fmt: skip
    from google.cloud import compute_v1

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


def delete(clients: Any, project: str, placement: Placement) -> None:
    from google.api_core import exceptions

    try:
        op = clients.resource_policies.delete(
            project=project, region=placement.location, resource_policy=placement.name,
            retry=clients.retry,
        )  # fmt: skip
    except exceptions.NotFound:
        return
    clients.wait(op, region=placement.location)
