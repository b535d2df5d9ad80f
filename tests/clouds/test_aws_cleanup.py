"""AWS clean-up against moto made as strict as EC2: a terminated instance is
``shutting-down`` for a while, and EC2 refuses to delete a security group an instance
still uses (``DependencyViolation``). Every validation instance's group must go: after the
instance is gone, or later through ``imagectl reap``."""

from __future__ import annotations

import datetime as dt

import boto3

from imagectl.clouds.reap import reap
from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]


def _managed_groups(region: str = "us-east-1") -> list[str]:
    ec2 = boto3.client("ec2", region_name=region)
    groups = ec2.describe_security_groups(
        Filters=[{"Name": "tag:imagectl:managed", "Values": ["true"]}]
    )["SecurityGroups"]
    return [g["GroupId"] for g in groups]


def _launch(env: CloudEnv):
    provider = env.provider()
    image = env.seed_candidate()
    inst = launch(provider, image, "p5.48xlarge", env.locations()[0], allowed_cidr="203.0.113.7/32")
    return provider, inst


def test_the_security_group_is_deleted_once_the_instance_is_gone(aws_moto) -> None:
    """Before, the group was deleted right after TerminateInstances, refused while the
    instance was shutting down, and the refusal swallowed: one group leaked per host."""
    provider, inst = _launch(CloudEnv("aws", aws_moto))
    assert len(_managed_groups()) == 1
    provider.terminate(inst)
    assert _managed_groups() == []


def test_reap_deletes_orphaned_groups_past_their_ttl(aws_moto) -> None:
    """A runner killed after terminating its instance leaves the group behind: the reaper
    deletes groups whose TTL passed and that no instance uses; never one in use."""
    env = CloudEnv("aws", aws_moto)
    provider, dead = _launch(env)
    _provider, alive = _launch(env)
    boto3.client("ec2", region_name="us-east-1").terminate_instances(InstanceIds=[dead.instance_id])
    for _ in range(3):  # until moto reports it terminated
        boto3.client("ec2", region_name="us-east-1").describe_instances()
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    planned = [r for r in reap(provider, dry_run=True, now=later) if r.action == "would-delete"]
    assert [r.instance.tags["imagectl:image"] for r in planned] == [dead.tags["imagectl:image"]]
    assert len(planned) == 1 and len(_managed_groups()) == 2  # the live host's is in use
    done = {r.instance.instance_id: r.action for r in reap(provider, now=later)}
    assert done[alive.instance_id] == "terminated"  # its TTL passed too: terminated, and
    assert list(done.values()).count("deleted") == 1  # its group went with it
    assert _managed_groups() == []


def test_with_a_subnet_only_its_zone_is_tried(aws_moto) -> None:
    """A subnet lives in one Availability Zone and EC2 refuses a placement elsewhere:
    the zone fallback must not walk the region's other zones (before, the first try was
    us-east-1a whatever the subnet, and every launch was refused)."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24", AvailabilityZone="us-east-1b")
    env = CloudEnv("aws", aws_moto)
    image = env.seed_candidate()
    provider = env.provider()
    provider.subnet_id = subnet["Subnet"]["SubnetId"]
    zones = provider.candidate_locations(image)
    assert zones == ["us-east-1b"]
    inst = launch(provider, image, "p5.48xlarge", zones[0])
    assert inst.region == "us-east-1b"
    provider.terminate(inst)
