"""AWS validation hosts of an EFA shape launch with the shape's EFA interfaces, and a
multi-node run's hosts share one security group that admits all traffic among its members
(SSH from the runner only), as EFA requires (EC2 User Guide, "Get started with EFA and
NCCL", step 1 and the launch step; the network cards per instance type from
``pipeline/clouds/aws/efa.yaml``, each with its source). Real boto3 against moto; the
requests are read at botocore's own event (``provide-client-params``)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from imagectl.clouds.aws.efa import efa_cards
from tests.fakes.fixtures import CloudEnv, launch, placement

pytest_plugins = ["tests.fakes.fixtures"]

RUNNER = "203.0.113.7/32"


def _recorded(provider: Any, region: str) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(copy.deepcopy(params))

    provider.clients.ec2(region).meta.events.register(
        "provide-client-params.ec2.RunInstances", record
    )
    return sent


def _launch(provider: Any, image: Any, shape: str, zone: str, run: Any = None) -> Any:
    return launch(provider, image, shape, zone, ssh_public_key="ssh-ed25519 AAAA k",
                  allowed_cidr=RUNNER, placement=run)  # fmt: skip


def _group(provider: Any, region: str, group_id: str) -> dict[str, Any]:
    (group,) = provider.clients.ec2(region).describe_security_groups(GroupIds=[group_id])[
        "SecurityGroups"
    ]
    return dict(group)


def _admits_members(group: dict[str, Any]) -> bool:
    return any(
        p["IpProtocol"] == "-1"
        and [g["GroupId"] for g in p.get("UserIdGroupPairs", [])] == [group["GroupId"]]
        for p in group["IpPermissions"]
    )


def _ssh_from(group: dict[str, Any]) -> list[str]:
    return [r["CidrIp"] for p in group["IpPermissions"] for r in p.get("IpRanges", [])]


def test_a_two_node_p5_run_shares_one_self_admitting_group_with_efa_interfaces(
    aws_moto: Any,
) -> None:
    env = CloudEnv("aws", aws_moto)
    provider = env.provider()
    image = env.seed_candidate()
    region = image.region
    sent = _recorded(provider, region)
    zone = provider.candidate_locations(image)[0]
    run = placement(provider, image, "p5.48xlarge", zone)
    nodes = [_launch(provider, image, "p5.48xlarge", zone, run) for _ in range(2)]

    assert len(sent) == 2 and efa_cards("p5.48xlarge") == 32
    groups = set()
    for request in sent:
        assert "SecurityGroupIds" not in request and "SubnetId" not in request
        nics = request["NetworkInterfaces"]
        assert [n["NetworkCardIndex"] for n in nics] == list(range(32))
        assert {n["InterfaceType"] for n in nics} == {"efa"}
        assert [n["DeviceIndex"] for n in nics] == [0] + [1] * 31
        groups.update(g for n in nics for g in n["Groups"])
        assert len({n["SubnetId"] for n in nics}) == 1
        assert request["Placement"]["GroupName"] == run.resource_id
    (group_id,) = groups  # one group for both hosts
    group = _group(provider, region, group_id)
    assert _admits_members(group)
    assert _ssh_from(group) == [RUNNER]  # SSH from the runner only, never 0.0.0.0/0

    # several interfaces: EC2 assigns no public address; each running host gets an
    # Elastic IP on its primary interface, released after its termination
    ec2 = provider.clients.ec2(region)
    for node in nodes:
        ready = provider.wait_reachable(node, timeout_s=30)
        (address,) = ec2.describe_addresses(
            Filters=[{"Name": "tag:imagectl:instance", "Values": [node.instance_id]}]
        )["Addresses"]
        assert ready.address == address["PublicIp"]
        assert {t["Key"]: t["Value"] for t in address["Tags"]}["imagectl:managed"] == "true"
    for node in nodes:
        provider.terminate(node)
    assert ec2.describe_addresses()["Addresses"] == []
    left = provider.clients.ec2(region).describe_security_groups(
        Filters=[{"Name": "group-id", "Values": [group_id]}]
    )["SecurityGroups"]
    assert left == [], "the last host's termination deletes the run's group"


def test_one_efa_host_has_its_interfaces_and_a_group_admitting_itself(aws_moto: Any) -> None:
    env = CloudEnv("aws", aws_moto)
    provider = env.provider()
    image = env.seed_candidate()
    sent = _recorded(provider, image.region)
    zone = provider.candidate_locations(image)[0]
    _launch(provider, image, "p4d.24xlarge", zone)
    (request,) = sent
    nics = request["NetworkInterfaces"]
    assert [n["NetworkCardIndex"] for n in nics] == [0, 1, 2, 3]
    assert _admits_members(_group(provider, image.region, nics[0]["Groups"][0]))


def test_a_shape_without_efa_keeps_the_plain_launch(aws_moto: Any) -> None:
    env = CloudEnv("aws", aws_moto)
    provider = env.provider()
    image = env.seed_candidate()
    sent = _recorded(provider, image.region)
    _launch(provider, image, "g5.xlarge", provider.candidate_locations(image)[0])
    (request,) = sent
    assert "NetworkInterfaces" not in request
    (group_id,) = request["SecurityGroupIds"]
    group = _group(provider, image.region, group_id)
    assert not _admits_members(group) and _ssh_from(group) == [RUNNER]


@pytest.mark.parametrize("shape", ["p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"])
def test_each_efa_shape_has_sourced_network_cards(shape: str) -> None:
    from imagectl.clouds.aws.efa import DATA
    from imagectl.core.yamlfast import load_data

    entry = load_data(DATA)["instance_types"][shape]
    assert entry["source"] and efa_cards(shape) == int(entry["network_cards"]) > 0


def test_reap_releases_the_elastic_ip_a_killed_run_left(aws_moto: Any) -> None:
    import boto3

    from imagectl.clouds.reap import reap

    env = CloudEnv("aws", aws_moto)
    provider = env.provider()
    ec2 = boto3.client("ec2", region_name="us-east-1")
    expired = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).isoformat()
    ec2.allocate_address(Domain="vpc", TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": [
        {"Key": "imagectl:managed", "Value": "true"},
        {"Key": "imagectl:expires-at", "Value": expired}]}])  # fmt: skip
    ec2.allocate_address(Domain="vpc")  # not imagectl's: kept
    done = [r for r in reap(provider, now=dt.datetime.now(dt.timezone.utc))
            if r.instance.shape == "elastic-ip"]  # fmt: skip
    assert [r.action for r in done] == ["deleted"]
    assert len(ec2.describe_addresses()["Addresses"]) == 1
