"""Proximity placement groups for multi-node validation runs (``imagectl.clouds.placement``).

Microsoft Learn, "Proximity placement groups": a logical grouping that keeps Azure
compute resources physically close for the lowest latency; a VM names it in
``properties.proximityPlacementGroup.id`` and must be in its location; the group can be
deleted only when no VM references it. REST: Proximity Placement Groups - Create Or
Update (``PUT .../providers/Microsoft.Compute/proximityPlacementGroups/{name}``, body
``location``, ``properties.proximityPlacementGroupType`` Standard | Ultra), Delete.
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.azure.errors import is_not_found
from imagectl.clouds.azure.resources import split_location
from imagectl.clouds.placement import Placement

KIND = "proximity placement group"


def create(compute: Any, rg: str, *, name: str, location: str, tags: dict[str, str]) -> Placement:
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


def delete(compute: Any, rg: str, placement: Placement) -> None:
    from azure.core.exceptions import HttpResponseError

    try:
        compute.proximity_placement_groups.delete(rg, placement.name)
    except HttpResponseError as exc:
        if not is_not_found(exc):
            raise
