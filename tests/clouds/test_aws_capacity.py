"""Validation on reserved capacity (p5 is rarely available on demand): an On-Demand
Capacity Reservation or a Capacity Block for ML, from the stack's
``clouds.aws.validation_capacity``, against moto extended with EC2's capacity
reservations (``tests/fakes/moto_extensions.py``)."""

from __future__ import annotations

import boto3
import pytest

from imagectl.clouds.base import CapacityError
from imagectl.core.errors import CloudError
from imagectl.validation.run import NoCapacity
from tests.fakes import moto_extensions
from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]


def _reservation(zone: str = "us-east-1b", count: int = 1, block: bool = False) -> str:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    rid = ec2.create_capacity_reservation(
        InstanceType="p5.48xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=count,
    )["CapacityReservation"]["CapacityReservationId"]
    if block:
        moto_extensions.BEHAVIOUR.reservations[rid]["ReservationType"] = "capacity-block"
    return rid


def _provider(env: CloudEnv, rid: str, block: bool = False):
    return env.provider_with(
        {"validation_capacity": {"reservation_id": rid, "capacity_block": block}}
    )


def _launch(provider, image, zone: str):
    return launch(provider, image, "p5.48xlarge", zone)


def test_validation_launches_into_the_reservation_and_names_it_when_full(aws_moto) -> None:
    env = CloudEnv("aws", aws_moto)
    rid = _reservation(count=1)
    provider = _provider(env, rid)
    image = env.seed_candidate()
    zones = provider.candidate_locations(image)
    assert zones == ["us-east-1b"]  # the reservation's zone, not the region's first
    first = _launch(provider, image, zones[0])
    assert first.region == "us-east-1b"
    with pytest.raises(CapacityError) as caught:  # the reservation has no instance left
        _launch(provider, image, zones[0])
    assert rid in caught.value.location and "ReservationCapacityExceeded" in caught.value.detail
    # what an inconclusive validation run reports: the reservation tried
    assert f"capacity reservation {rid}" in str(NoCapacity([caught.value]))
    provider.terminate(first)


def test_a_capacity_block_is_launched_as_one(aws_moto) -> None:
    env = CloudEnv("aws", aws_moto)
    rid = _reservation(zone="us-east-1c", block=True)
    image = env.seed_candidate()
    # not a capacity or quota code: what EC2 refused (clouds.common.launch_failure)
    with pytest.raises(
        CloudError, match=r"EC2 refused to launch p5\.48xlarge .*MarketType capacity-block"
    ):
        _launch(_provider(env, rid, block=False), image, "us-east-1c")
    inst = _launch(_provider(env, rid, block=True), image, "us-east-1c")
    assert inst.region == "us-east-1c"
