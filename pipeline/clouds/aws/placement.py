"""Cluster placement groups for multi-node validation runs (``imagectl.clouds.placement``).

EC2 User Guide, "Placement strategies for your placement groups": a cluster placement group
"packs instances close together inside an Availability Zone", for "low-latency network
performance necessary for tightly-coupled node-to-node communication"; the instances name
it in ``RunInstances`` ``Placement.GroupName``; ``DeletePlacementGroup`` fails while
instances are in it (terminate them first). API reference: CreatePlacementGroup
(``GroupName``, ``Strategy`` cluster | spread | partition, ``TagSpecifications`` with
``ResourceType`` placement-group).

The run tags the group as it tags its instances (``imagectl:managed``,
``imagectl:expires-at``...: ``TagSpecifications`` on create), so ``imagectl reap`` finds a
group a dead runner left: ``DescribePlacementGroups`` with the filter
``tag:imagectl:managed`` (its API reference lists ``tag:<key>`` among the filters, and no
``MaxResults``/``NextToken``: it answers every group at once, unpaged). Which instances a
group holds is not in that answer: ``DescribeInstances`` (paged) names each instance's
``Placement.GroupName``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagectl.clouds.aws.errors import error_code
from imagectl.clouds.aws.tags import tag_dict, tag_list
from imagectl.clouds.placement import ManagedPlacement, Placement
from imagectl.tags import TAG_MANAGED

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

KIND = "cluster placement group"
# the states in which an instance still holds its group (every one but terminated:
# DeletePlacementGroup is refused until its instances are terminated)
HOLDING = ["pending", "running", "shutting-down", "stopping", "stopped"]


def create(ec2: EC2Client, *, name: str, region: str, tags: dict[str, str]) -> Placement:
    ec2.create_placement_group(
        GroupName=name,
        Strategy="cluster",
        TagSpecifications=[{"ResourceType": "placement-group", "Tags": tag_list(tags)}],
    )
    return Placement("aws", KIND, name, region, name)


def delete(ec2: EC2Client, placement: Placement) -> None:
    from botocore.exceptions import ClientError

    try:
        ec2.delete_placement_group(GroupName=placement.name)
    except ClientError as exc:
        if error_code(exc) == "InvalidPlacementGroup.Unknown":
            return
        raise


def list_managed(ec2: EC2Client, region: str) -> list[ManagedPlacement]:
    """The region's placement groups tagged ``imagectl:managed=true``, with their tags and
    the instances (any state but terminated) each holds."""
    groups = ec2.describe_placement_groups(
        Filters=[{"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]}]
    )["PlacementGroups"]
    if not groups:
        return []
    members: dict[str, list[str]] = {}
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": HOLDING}]
    )
    for page in pages:
        for reservation in page["Reservations"]:
            for raw in reservation["Instances"]:
                group = (raw.get("Placement") or {}).get("GroupName")
                if group:
                    members.setdefault(str(group), []).append(str(raw["InstanceId"]))
    return [
        ManagedPlacement(
            Placement("aws", KIND, str(g["GroupName"]), region, str(g["GroupName"])),
            tags=tag_dict(g.get("Tags")),
            members=tuple(members.get(str(g["GroupName"]), ())),
        )
        for g in groups
    ]
