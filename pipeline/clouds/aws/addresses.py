"""A public address for a validation host that EC2 gives none: an instance launched with
several network interfaces (an EFA shape, one interface per network card) gets no
auto-assigned public IPv4 address ("You can't auto-assign a public IPv4 address if you
specify more than one network interface": EC2 User Guide, "Assign a public IPv4 address
during instance launch"), so a runner outside the VPC could not reach it. An Elastic IP
address, tagged like the instance, is associated with its primary interface once the
instance runs, and released after its termination; ``imagectl reap`` releases those a
killed run left (tagged ``imagectl:managed``, associated with nothing, past their TTL).
Sources: EC2 API reference, AllocateAddress (TagSpecifications ``elastic-ip``),
AssociateAddress (NetworkInterfaceId), ReleaseAddress, DescribeAddresses (``tag:`` filters).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from imagectl.clouds.aws.tags import tag_dict, tag_list
from imagectl.clouds.common import parse_time
from imagectl.tags import TAG_IMAGE, TAG_MANAGED, TAG_TTL

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import AddressTypeDef, InstanceTypeDef

TAG_INSTANCE = "imagectl:instance"  # the host an address was allocated for


def primary_interface(raw: InstanceTypeDef) -> str | None:
    """The instance's primary interface: network card 0, device 0."""
    for nic in raw.get("NetworkInterfaces") or []:
        attachment = nic.get("Attachment") or {}
        if (
            int(attachment.get("DeviceIndex", -1)) == 0
            and int(attachment.get("NetworkCardIndex", 0)) == 0
        ):
            return str(nic["NetworkInterfaceId"])
    return None


def attach(ec2: EC2Client, raw: InstanceTypeDef) -> str | None:
    """Allocate an Elastic IP tagged like the instance and associate it with its primary
    interface; the address (None when the instance has one already or no interface)."""
    if raw.get("PublicIpAddress"):
        return str(raw["PublicIpAddress"])
    eni = primary_interface(raw)
    if eni is None:
        return None
    tags = tag_dict(raw.get("Tags"))
    mine = {k: v for k, v in tags.items() if k in (TAG_MANAGED, TAG_TTL, TAG_IMAGE)}
    mine[TAG_INSTANCE] = str(raw["InstanceId"])
    allocated = ec2.allocate_address(
        Domain="vpc",
        TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": tag_list(mine)}],
    )
    ec2.associate_address(AllocationId=allocated["AllocationId"], NetworkInterfaceId=eni)
    return str(allocated["PublicIp"])


def release_for(ec2: EC2Client, instance_id: str) -> None:
    """Release the addresses allocated for ``instance_id`` (after its termination)."""
    found = ec2.describe_addresses(
        Filters=[{"Name": f"tag:{TAG_INSTANCE}", "Values": [instance_id]}]
    )["Addresses"]
    for address in found:
        ec2.release_address(AllocationId=address["AllocationId"])


def orphans(ec2: EC2Client, now: dt.datetime) -> list[AddressTypeDef]:
    """imagectl's addresses associated with nothing whose TTL passed."""
    found = ec2.describe_addresses(Filters=[{"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]}])[
        "Addresses"
    ]
    out = []
    for address in found:
        expires = parse_time(tag_dict(address.get("Tags")).get(TAG_TTL))
        if address.get("AssociationId") or expires is None or expires > now:
            continue
        out.append(address)
    return out


def release(ec2: EC2Client, allocation_id: str) -> None:
    ec2.release_address(AllocationId=allocation_id)
