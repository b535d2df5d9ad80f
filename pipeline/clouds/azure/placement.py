"""Proximity placement groups for multi-node validation runs (``imagectl.clouds.placement``).

Microsoft Learn, "Proximity placement groups": a logical grouping that keeps Azure
compute resources physically close for the lowest latency; a VM names it in
``properties.proximityPlacementGroup.id`` and must be in its location; the group can be
deleted only when no VM references it. REST: Proximity Placement Groups - Create Or
Update (``PUT .../providers/Microsoft.Compute/proximityPlacementGroups/{name}``, body
``location``, ``properties.proximityPlacementGroupType`` Standard | Ultra), Delete.

The run tags the group as it tags its VMs (``imagectl:managed``, ``imagectl:expires-at``...),
so ``imagectl reap`` finds one a dead runner left: Proximity Placement Groups - List By
Resource Group (pages by ``nextLink``, which the SDK's pager follows) answers each group
with its tags and, read-only, the ``virtualMachines``, ``virtualMachineScaleSets`` and
``availabilitySets`` in it: a group any of them references is in use and cannot be deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagectl.clouds.azure.errors import is_not_found
from imagectl.clouds.azure.resources import split_location
from imagectl.clouds.placement import ManagedPlacement, Placement
from imagectl.tags import TAG_MANAGED

if TYPE_CHECKING:
    from azure.mgmt.compute import ComputeManagementClient

KIND = "proximity placement group"


def create(
    compute: ComputeManagementClient, rg: str, *, name: str, location: str, tags: dict[str, str]
) -> Placement:
    from azure.mgmt.compute import models as m

    region, _zone = split_location(location)
    group = compute.proximity_placement_groups.create_or_update(
        rg,
        name,
        m.ProximityPlacementGroup(
            location=region,
            tags=tags,
            properties=m.ProximityPlacementGroupProperties(
                proximity_placement_group_type="Standard"
            ),
        ),
    )
    return Placement("azure", KIND, name, region, str(group.id))


def delete(compute: ComputeManagementClient, rg: str, placement: Placement) -> None:
    from azure.core.exceptions import HttpResponseError

    try:
        compute.proximity_placement_groups.delete(rg, placement.name)
    except HttpResponseError as exc:
        if not is_not_found(exc):
            raise


def list_managed(compute: ComputeManagementClient, rg: str) -> list[ManagedPlacement]:
    """The resource group's proximity placement groups tagged ``imagectl:managed=true``,
    with their tags and the resources (by name) each holds."""
    found = []
    for group in compute.proximity_placement_groups.list_by_resource_group(rg):
        tags = dict(group.tags or {})
        if tags.get(TAG_MANAGED) != "true":
            continue
        refs = [
            *(group.virtual_machines or []),
            *(group.virtual_machine_scale_sets or []),
            *(group.availability_sets or []),
        ]
        found.append(
            ManagedPlacement(
                Placement("azure", KIND, str(group.name), str(group.location), str(group.id)),
                tags=tags,
                members=tuple(str(ref.id).rsplit("/", 1)[-1] for ref in refs if ref.id),
            )
        )
    return found
