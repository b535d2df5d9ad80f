"""The per-instance security group: SSH from the runner's address only, or nothing.

With ``allowed_cidr`` the group admits TCP 22 from that one CIDR; without it the group
admits nothing, which is why ``validate-image`` requires ``--runner-cidr`` on AWS (no SSM
or Instance Connect tunnel is implemented). Never 0.0.0.0/0. The group is tagged like the
instance so that the reaper can delete it after the instance is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagectl.clouds.aws.tags import tag_list
from imagectl.clouds.common import check_cidr
from imagectl.core.errors import UserError

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import FilterTypeDef


def vpc_of(ec2: EC2Client, subnet_id: str | None) -> str:
    if subnet_id:
        subnets = ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"]
        return str(subnets[0]["VpcId"])
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise UserError(
            "this region has no default VPC to launch the validation instance in",
            hint="Set the stack's clouds.aws.build.subnet_id to a subnet of your VPC",
        )
    return str(vpcs[0]["VpcId"])


def create_group(
    ec2: EC2Client, *, name: str, vpc_id: str, allowed_cidr: str | None, tags: dict[str, str]
) -> str:
    check_cidr(allowed_cidr)
    group = ec2.create_security_group(
        GroupName=name,
        Description="imagectl validation instance: SSH from the runner only",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tag_list(tags)}],
    )
    group_id = str(group["GroupId"])
    if allowed_cidr:
        ec2.authorize_security_group_ingress(
            GroupId=group_id,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 22,
                    "ToPort": 22,
                    "IpRanges": [{"CidrIp": allowed_cidr, "Description": "imagectl runner"}],
                }
            ],
        )
    return group_id


# What EC2 answers for a group still attached to a terminating instance, or already gone
# (EC2 API reference, "Error codes for the Amazon EC2 API"): left to the reaper. Any other
# refusal (UnauthorizedOperation: the role lacks ec2:DeleteSecurityGroup) is raised, so
# that a group is never reported deleted when it is not.
LEFT_FOR_LATER = {"DependencyViolation", "InvalidGroup.NotFound", "InvalidGroup.InUse"}


def delete_group(ec2: EC2Client, group_id: str) -> None:
    """Best effort: a group still attached to a terminating instance is left to the reaper."""
    from botocore.exceptions import ClientError

    try:
        ec2.delete_security_group(GroupId=group_id)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in LEFT_FOR_LATER:
            raise


def admit_members(ec2: EC2Client, group_id: str) -> None:
    """All traffic from the group's own members: what EFA needs ("Get started with EFA and
    NCCL", step 1: "allows all inbound and outbound traffic to and from the security group
    itself"; outbound is the new group's default rule, all traffic to anywhere), and what
    a multi-node run's hosts need to reach each other. SSH stays the runner's only."""
    from botocore.exceptions import ClientError

    try:
        ec2.authorize_security_group_ingress(
            GroupId=group_id,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [
                {"GroupId": group_id, "Description": "imagectl: the run's own hosts (EFA, NCCL)"}
            ]}],
        )  # fmt: skip
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "InvalidPermission.Duplicate":
            raise


def default_subnet(ec2: EC2Client, zone: str | None) -> str:
    """The default subnet of ``zone`` (any zone's when None): EFA interfaces are created in
    a subnet named in the request (``NetworkInterfaces[].SubnetId``)."""
    filters: list[FilterTypeDef] = [{"Name": "default-for-az", "Values": ["true"]}]
    if zone:
        filters.append({"Name": "availability-zone", "Values": [zone]})
    found = ec2.describe_subnets(Filters=filters)["Subnets"]
    if not found:
        raise UserError(
            f"{zone or 'this region'} has no default subnet to create the instance's EFA "
            "interfaces in",
            hint="Set the stack's clouds.aws.build.subnet_id to a subnet of your VPC in "
            "the zone the validation runs in",
        )
    return str(found[0]["SubnetId"])
