"""Cluster placement groups for multi-node validation runs (``imagectl.clouds.placement``).

EC2 User Guide, "Placement strategies for your placement groups": a cluster placement group
"packs instances close together inside an Availability Zone", for "low-latency network
performance necessary for tightly-coupled node-to-node communication"; the instances name
it in ``RunInstances`` ``Placement.GroupName``; ``DeletePlacementGroup`` fails while
instances are in it (terminate them first). API reference: CreatePlacementGroup
(``GroupName``, ``Strategy`` cluster | spread | partition, ``TagSpecifications`` with
``ResourceType`` placement-group).
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.aws.errors import error_code
from imagectl.clouds.aws.tags import tag_list
from imagectl.clouds.placement import Placement

KIND = "cluster placement group"


def create(ec2: Any, *, name: str, region: str, tags: dict[str, str]) -> Placement:
    ec2.create_placement_group(
        GroupName=name,
        Strategy="cluster",
        TagSpecifications=[{"ResourceType": "placement-group", "Tags": tag_list(tags)}],
    )
    return Placement("aws", KIND, name, region, name)


def delete(ec2: Any, placement: Placement) -> None:
    from botocore.exceptions import ClientError

    try:
        ec2.delete_placement_group(GroupName=placement.name)
    except ClientError as exc:
        if error_code(exc) == "InvalidPlacementGroup.Unknown":
            return
        raise
