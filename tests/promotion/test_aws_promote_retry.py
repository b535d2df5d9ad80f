"""Re-running an AWS promotion never makes one more copy of the image: a copy is found by
what EC2 returns for it (its ``TagSpecifications`` tag, or EC2's own ``SourceImageId``
record when the tags did not arrive), not only by imagectl's tag.

The moto server here is as strict as EC2 (``tests/fakes/moto_extensions.py``: copies stay
``pending``, ``ClientToken`` is idempotent); ``BEHAVIOUR.drop_copy_tags`` loses the
requested tags, as a plain moto server does. Before, such a copy was never found: every
region ended "the copy disappeared", each retry asked for (and left) one more untagged
AMI, and the stack could not be promoted."""

from __future__ import annotations

import boto3

from imagectl.promotion import promote
from imagectl.tags import TAG_SOURCE_IMAGE
from tests.fakes import moto_extensions

STACK = "h100-training"


def _copies(env, source: str, region: str) -> list[dict]:
    """Every AMI in ``region`` whose name is the source's (how a copy is named), tagged or
    not, any state but deregistered: what a retry could have left behind."""
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=env.endpoint)
    name = ec2.describe_images(ImageIds=[source])["Images"][0]["Name"]
    there = boto3.client("ec2", region_name=region, endpoint_url=env.endpoint)
    return there.describe_images(Owners=["self"], Filters=[{"Name": "name", "Values": [name]}])[
        "Images"
    ]


def test_a_rerun_after_a_partial_failure_makes_no_second_copy(cloud_aws) -> None:
    """First run: every copy is accepted but stays ``pending`` past the run's timeout, its
    tags lost: ``partially_promoted``. Second run, once the copies are available: the
    same copies are promoted, one AMI per region, and the pointers name them."""
    env = cloud_aws
    moto_extensions.BEHAVIOUR.drop_copy_tags = True
    moto_extensions.BEHAVIOUR.copy_pending_polls = 10**6
    img = env.seed()
    targets = [r for r in env.regions if r != "us-east-1"]

    first = promote(env.catalog, env.provider(), env.resolved, img.id, poll_s=0.01, timeout_s=0.5)
    assert first.state == "partially_promoted", first.regions
    made = {}
    for region in targets:
        assert first.regions[region].state == "failed"
        assert "still pending" in (first.regions[region].error or ""), first.regions[region]
        (copy,) = _copies(env, img.cloud_image_id, region)
        made[region] = copy["ImageId"]
    for entry in moto_extensions.BEHAVIOUR.pending.values():  # the copies now finish
        entry[0] = 1

    second = promote(env.catalog, env.provider(), env.resolved, img.id, poll_s=0.01)
    assert second.state == "promoted", second.regions
    for region in targets:
        (copy,) = _copies(env, img.cloud_image_id, region)
        assert copy["State"] == "available"
        assert second.regions[region].replica_id == copy["ImageId"] == made[region]
        assert env.provider().get_pointer(STACK, region) == copy["ImageId"]


def test_an_untagged_copy_from_an_earlier_attempt_is_used_not_copied_again(cloud_aws) -> None:
    """An earlier attempt's copy whose tags never arrived (and whose id was never
    recorded: the answer was lost) is found by EC2's ``source-image-id`` record; the
    promotion uses it, tags it, and asks for no other copy."""
    env = cloud_aws
    img = env.seed()
    region = env.regions[-1]
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=env.endpoint)
    name = boto3.client("ec2", region_name="us-east-1", endpoint_url=env.endpoint).describe_images(
        ImageIds=[img.cloud_image_id]
    )["Images"][0]["Name"]
    earlier = ec2.copy_image(Name=name, SourceImageId=img.cloud_image_id, SourceRegion="us-east-1")[
        "ImageId"
    ]
    (untagged,) = _copies(env, img.cloud_image_id, region)
    assert untagged["ImageId"] == earlier and not untagged.get("Tags")
    assert untagged["SourceImageId"] == img.cloud_image_id  # what EC2 records for a copy

    result = promote(env.catalog, env.provider(), env.resolved, img.id, poll_s=0.01)
    assert result.state == "promoted", result.regions
    (copy,) = _copies(env, img.cloud_image_id, region)
    assert copy["ImageId"] == earlier == result.regions[region].replica_id
    tags = {t["Key"]: t["Value"] for t in copy.get("Tags", [])}
    assert tags[TAG_SOURCE_IMAGE] == img.cloud_image_id  # found by tag from now on
    assert env.provider().get_pointer(STACK, region) == earlier


def test_the_same_client_token_gives_the_same_copy(cloud_aws) -> None:
    """``replicate`` with a token whose copy EC2 already made (the tags lost, the answer
    lost with the process) gets that AMI back from ``CopyImage``: no second AMI."""
    env = cloud_aws
    moto_extensions.BEHAVIOUR.drop_copy_tags = True
    img = env.seed()
    region = env.regions[1]
    first = env.provider()
    source = first.get_image(img.cloud_image_id, "us-east-1")
    started = first.replicate(source, region, token="imagectl-token-1")
    assert started.image_id
    again = env.provider().replicate(source, region, token="imagectl-token-1")
    assert again.image_id == started.image_id
    assert [c["ImageId"] for c in _copies(env, img.cloud_image_id, region)] == [started.image_id]
