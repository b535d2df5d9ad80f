"""The kill points against AWS (a moto server): SIGKILL the real ``imagectl promote`` while
copies are recorded or pointers move, re-run, and count AMIs per region and SSM writes."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from imagectl.catalog import repository as repo
from imagectl.promotion.crash import POINTS


def replicas_of(env, source: str, region: str) -> list[str]:
    import boto3

    if region == "us-east-1":
        return [source]
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=env.endpoint)
    found = ec2.describe_images(
        Owners=["self"], Filters=[{"Name": "tag:imagectl:source-image", "Values": [source]}]
    )["Images"]
    return [i["ImageId"] for i in found]


KILLS = [
    "after_copy_requested:2",
    "after_copy_call:2",
    "after_copy_started:2",
    "after_region_done:1",
    "before_pointer_flip",
    "after_pointer_set:2",
    "before_finish",
]


def test_every_kill_point_is_covered_on_aws() -> None:
    assert sorted(k.split(":")[0] for k in KILLS) == sorted(POINTS)


@pytest.mark.parametrize("kill", KILLS)
def test_aws_kill_and_rerun(world, cloud_aws, kill: str) -> None:
    env = cloud_aws
    img = env.seed()
    args = ("promote", img.cloud_image_id, "--stack", "h100-training", "--cloud", "aws")
    crashed = world.run_cli(*args, timeout=300, IMAGECTL_TEST_CRASH_AT=kill, **env.env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    rerun = world.run_cli(*args, timeout=300, **env.env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    provider = env.provider()
    with world.catalog.transaction() as s:
        pointers = {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack="h100-training", cloud="aws")
        }
        assert repo.get_image(s, img.id).state == "promoted"
    assert set(pointers) == set(env.regions)
    for region in env.regions:
        # exactly one replica per region (the one tagged with the source id, which the
        # catalog and SSM name); pointer flips and copy records are counted below.
        assert replicas_of(env, img.cloud_image_id, region) == [pointers[region]]
        # every AMI with the image's name, tagged or not: moto ignores ClientToken and
        # TagSpecifications, so a copy the kill left untagged must have been adopted
        assert env.count_copies(img.cloud_image_id, region) == 1
        assert provider.get_pointer("h100-training", region) == pointers[region]  # SSM
    assert pointers["us-east-1"] == img.cloud_image_id
    sets = Counter(e.details["region"] for e in world.events("pointer.set"))
    assert sets == Counter(env.regions)
    assert len(world.events("promotion.pointer.flipped")) == 1


def test_untagged_copy_left_by_a_kill_is_adopted(world, cloud_aws) -> None:
    """What a kill between CopyImage and the tagging leaves on an emulator: an untagged
    AMI with the image's name. The re-run adopts it instead of copying again."""
    import boto3

    env = cloud_aws
    img = env.seed()
    region = env.regions[-1]
    source = boto3.client("ec2", region_name="us-east-1", endpoint_url=env.endpoint)
    name = source.describe_images(ImageIds=[img.cloud_image_id])["Images"][0]["Name"]
    dest = boto3.client("ec2", region_name=region, endpoint_url=env.endpoint)
    orphan = dest.copy_image(Name=name, SourceImageId=img.cloud_image_id, SourceRegion="us-east-1")
    args = ("promote", img.cloud_image_id, "--stack", "h100-training", "--cloud", "aws")
    done = world.run_cli(*args, timeout=300, **env.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert env.count_copies(img.cloud_image_id, region) == 1
    assert replicas_of(env, img.cloud_image_id, region) == [orphan["ImageId"]]
    assert env.provider().get_pointer("h100-training", region) == orphan["ImageId"]
