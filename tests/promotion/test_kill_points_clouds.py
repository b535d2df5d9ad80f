"""The kill points against each cloud's emulator (a moto server, the Compute REST and ARM
fakes): SIGKILL the real ``imagectl promote`` at every recorded step, re-run it, and
count copies per region and pointer writes."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from imagectl.catalog import repository as repo
from imagectl.crashpoints import POINTS


def replicas_of(env, source: str, region: str) -> list[str]:
    import boto3

    if region == "us-east-1":
        return [source]
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=env.endpoint)
    found = ec2.describe_images(
        Owners=["self"], Filters=[{"Name": "tag:imagectl:source-image", "Values": [source]}]
    )["Images"]
    return [i["ImageId"] for i in found]


# The n-th time a point is reached (copy points count copies: Google Cloud has one region
# besides the image's own, so the first; the others the second, with one copy done).
KILLS = [
    "after_copy_requested",
    "after_copy_call",
    "after_copy_started",
    "after_region_done:1",
    "before_pointer_flip",
    "after_pointer_set:2",
    "before_finish",
]
COPY_POINTS = ("after_copy_requested", "after_copy_call", "after_copy_started")


def _nth(kill: str, cloud: str) -> str:
    if kill in COPY_POINTS:
        return f"{kill}:{1 if cloud == 'gcp' else 2}"
    return kill


GCP_ONLY = ("inside_family_member",)


def test_every_kill_point_is_covered_on_the_clouds() -> None:
    assert sorted(k.split(":")[0] for k in (*KILLS, *GCP_ONLY)) == sorted(POINTS)


@pytest.mark.parametrize("kill", KILLS)
def test_kill_and_rerun_on_each_cloud(world, cloud, kill: str) -> None:
    """SIGKILL the real ``imagectl promote`` at ``kill`` against the cloud's emulator, run
    it again: every region has exactly one copy, the catalog and the cloud agree on every
    pointer, each pointer was set once and the flip happened once."""
    img = cloud.seed()
    args = ("promote", img.cloud_image_id, "--stack", "h100-training", "--cloud", cloud.cloud)
    env = {**cloud.env, "IMAGECTL_CLOUD_POLL_S": "0.01"}
    at = _nth(kill, cloud.cloud)
    crashed = world.run_cli(*args, timeout=300, IMAGECTL_TEST_CRASH_AT=at, **env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    rerun = world.run_cli(*args, timeout=300, **env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    provider = cloud.provider()
    with world.catalog.transaction() as s:
        pointers = {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack="h100-training", cloud=cloud.cloud)
        }
        assert repo.get_image(s, img.id).state == "promoted"
    assert set(pointers) == set(cloud.regions)
    for region in cloud.regions:
        # every copy there, tagged or not: the re-run's CopyImage carries the recorded
        # ClientToken, and the emulator (like EC2) answers it with the same AMI
        pointer = provider.get_pointer("h100-training", region)
        if cloud.cloud == "gcp":  # one global family: it resolves to this image's member
            assert pointer and img.cloud_image_id in pointer, pointer
            assert cloud.family_members is not None
            # one promotion, one image: the family member, stored in every region
            assert cloud.family_members(img.cloud_image_id) == 1
        else:
            assert cloud.count_copies(img.cloud_image_id, region) == 1, (
                region
            )  # an SSM parameter / exclude_from_latest per region
            assert pointer == pointers[region]
        if cloud.cloud == "aws":  # the one copy is the tagged replica the catalog names
            assert replicas_of(cloud, img.cloud_image_id, region) == [pointers[region]]
    sets = Counter(e.details["region"] for e in world.events("pointer.set"))
    assert sets == Counter(cloud.regions)
    assert len(world.events("promotion.pointer.flipped")) == 1


@pytest.mark.parametrize("cloud", ["gcp"], indirect=True)
def test_kill_inside_the_family_member_creation(world, cloud) -> None:
    """Google Cloud: SIGKILL right after the promoted image's family was sent
    (``images.patch``), before its operation finished. The re-run finds the image in the
    family or joins it again, and the family has exactly one member of this image: the
    pointer flipped once."""
    img = cloud.seed()
    args = ("promote", img.cloud_image_id, "--stack", "h100-training", "--cloud", "gcp")
    env = {**cloud.env, "IMAGECTL_CLOUD_POLL_S": "0.01"}
    crashed = world.run_cli(
        *args, timeout=300, IMAGECTL_TEST_CRASH_AT="inside_family_member", **env
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert cloud.family_members is not None
    rerun = world.run_cli(*args, timeout=300, **env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert cloud.family_members(img.cloud_image_id) == 1
    pointer = cloud.provider().get_pointer("h100-training", cloud.regions[0])
    assert pointer and img.cloud_image_id in pointer
    assert len(world.events("promotion.pointer.flipped")) == 1
