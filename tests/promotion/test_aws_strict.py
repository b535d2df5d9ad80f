"""AWS promotion against a moto server made as strict as EC2 and SSM (see
``tests/fakes/moto_extensions.py``): copies stay ``pending`` and can end ``failed``,
``CopyImage`` honours ``ClientToken`` and ``TagSpecifications``, ``aws:ec2:image``
parameters are validated asynchronously, ``DeregisterImage`` can take the snapshots."""

from __future__ import annotations

from dataclasses import replace

import boto3
import pytest

from imagectl.catalog import repository as repo
from imagectl.clouds.base import CloudImage
from imagectl.core.errors import CloudError
from imagectl.promotion import promote
from tests.fakes import moto_extensions


def _ec2(env, region: str):
    return boto3.client("ec2", region_name=region, endpoint_url=env.endpoint)


def _copies(env, source: str, region: str) -> list[dict]:
    name = _ec2(env, "us-east-1").describe_images(ImageIds=[source])["Images"][0]["Name"]
    return _ec2(env, region).describe_images(
        Owners=["self"], Filters=[{"Name": "name", "Values": [name]}]
    )["Images"]


def test_a_failed_copy_is_copied_again_on_the_next_run(cloud_aws) -> None:
    """EC2 can end a copy ``failed`` (StateReason). The re-run must deregister it and
    copy again with a new token; before, the failed AMI was found again on every retry
    and the region could never be promoted."""
    env = cloud_aws
    bad = env.regions[-1]
    img = env.seed()
    moto_extensions.BEHAVIOUR.fail_copies_into.add(bad)
    first = promote(env.catalog, env.provider(), env.resolved, img.id, poll_s=0.01)
    assert first.state == "partially_promoted", first.regions
    assert first.regions[bad].state == "failed"
    assert [c["State"] for c in _copies(env, img.cloud_image_id, bad)] == ["failed"]

    moto_extensions.BEHAVIOUR.fail_copies_into.clear()
    second = promote(env.catalog, env.provider(), env.resolved, img.id, poll_s=0.01)
    assert second.state == "promoted", second.regions
    copies = _copies(env, img.cloud_image_id, bad)
    assert [c["State"] for c in copies] == ["available"]  # the failed one is gone
    assert second.regions[bad].replica_id == copies[0]["ImageId"]
    assert env.provider().get_pointer("h100-training", bad) == copies[0]["ImageId"]


def test_copies_are_tagged_in_the_copy_request(cloud_aws) -> None:
    """The replica and its snapshot carry imagectl's tags from the moment the copy
    exists (``TagSpecifications``), while it is still ``pending``: no ``CreateTags``
    right after ``CopyImage`` racing EC2's eventual consistency."""
    env = cloud_aws
    moto_extensions.BEHAVIOUR.copy_pending_polls = 50
    img = env.seed()
    provider = env.provider()
    source = provider.get_image(img.cloud_image_id, "us-east-1")
    region = env.regions[1]
    sent: list[str] = []
    provider.clients.ec2(region).meta.events.register(
        "before-call.ec2.*", lambda model, **_kw: sent.append(model.name)
    )
    status = provider.replicate(source, region, token="imagectl-" + "a" * 40)
    assert "CopyImage" in sent and "CreateTags" not in sent, sent
    assert status.state == "pending" and status.image_id
    (raw,) = _ec2(env, region).describe_images(ImageIds=[status.image_id])["Images"]
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
    assert raw["State"] == "pending"
    assert tags["imagectl:source-image"] == img.cloud_image_id
    assert tags["imagectl:stack"] == "h100-training"
    snapshot = raw["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    (snap,) = _ec2(env, region).describe_snapshots(SnapshotIds=[snapshot])["Snapshots"]
    assert {t["Key"]: t["Value"] for t in snap["Tags"]}["imagectl:source-image"] == (
        img.cloud_image_id
    )
    # the same token again (a re-run after a kill) is the same AMI, not a second copy
    again = provider.replicate(source, region, token="imagectl-" + "a" * 40)
    assert again.image_id == status.image_id
    assert len(_copies(env, img.cloud_image_id, region)) == 1


def test_the_ssm_pointer_is_read_back_after_writing(cloud_aws) -> None:
    """``PutParameter`` answers 200 for an ``aws:ec2:image`` value SSM then refuses
    (an AMI that is not available in that region). ``set_pointer`` must notice: before,
    the catalog said "flipped" while the parameter never moved."""
    env = cloud_aws
    provider = env.provider()
    provider.pointer_timeout_s = 0.2
    good = env.seed()
    provider.set_pointer("h100-training", "us-east-1", good.cloud_image_id)
    assert provider.get_pointer("h100-training", "us-east-1") == good.cloud_image_id

    moto_extensions.BEHAVIOUR.copy_pending_polls = 1000
    source = provider.get_image(good.cloud_image_id, "us-east-1")
    pending = provider.replicate(source, "us-west-2", token="imagectl-" + "b" * 40)
    assert pending.state == "pending"
    with pytest.raises(CloudError, match="still names nothing"):
        provider.set_pointer("h100-training", "us-west-2", str(pending.image_id))
    with pytest.raises(CloudError, match="not ami-0123456789abcdef0"):  # no such AMI
        provider.set_pointer("h100-training", "us-east-1", "ami-0123456789abcdef0")
    assert provider.get_pointer("h100-training", "us-west-2") is None
    assert provider.get_pointer("h100-training", "us-east-1") == good.cloud_image_id


def test_a_refused_pointer_leaves_the_catalog_unflipped(cloud_aws) -> None:
    """A promotion whose pointer SSM refuses stays open: the catalog records no flip."""
    env = cloud_aws
    img = env.seed()
    moto_extensions.BEHAVIOUR.ssm_validation_polls = 10**6  # validation never finishes
    provider = env.provider()
    provider.pointer_timeout_s = 0.2
    with pytest.raises(CloudError):
        promote(env.catalog, provider, env.resolved, img.id, poll_s=0.01)
    with env.catalog.transaction() as s:
        assert repo.list_pointers(s, stack="h100-training", cloud="aws") == []
        assert repo.events(s, kind="promotion.pointer.flipped") == []


def test_deleting_an_ami_takes_its_snapshots(cloud_aws) -> None:
    env = cloud_aws
    img = env.seed()
    ec2 = _ec2(env, "us-east-1")
    (raw,) = ec2.describe_images(ImageIds=[img.cloud_image_id])["Images"]
    snapshot = raw["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    env.provider().delete(CloudImage("aws", "us-east-1", img.cloud_image_id))
    assert ec2.describe_images(Owners=["self"])["Images"] == []
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="InvalidSnapshot.NotFound"):
        ec2.describe_snapshots(SnapshotIds=[snapshot])


def test_copies_use_the_stack_kms_key_of_each_region_and_time_bound_copy(cloud_aws) -> None:
    """``clouds.aws.kms_key_ids`` and ``time_bound_copy_minutes`` go into each region's
    ``CopyImage`` (``Encrypted`` + ``KmsKeyId``, ``SnapshotCopyCompletionDurationMinutes``)."""
    from types import SimpleNamespace

    from imagectl.clouds.options import provider_options
    from imagectl.clouds.registry import cloud_spec, get_provider
    from imagectl.stacks.schema import Stack

    env = cloud_aws
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    raw = env.resolved.stack.model_dump(mode="json")
    raw["clouds"]["aws"].update(kms_key_ids={"eu-west-1": key}, time_bound_copy_minutes=60)
    stack = Stack.model_validate(raw)
    opts = provider_options(SimpleNamespace(stack=stack, name=stack.name), cloud_spec("aws"))
    provider = get_provider(cloud_spec("aws"), replace(opts, endpoint_url=env.endpoint))
    img = env.seed()
    source = provider.get_image(img.cloud_image_id, "us-east-1")
    plain = provider.replicate(source, "us-west-2", token="imagectl-" + "c" * 40)
    sealed = provider.replicate(source, "eu-west-1", token="imagectl-" + "d" * 40)
    copies = moto_extensions.BEHAVIOUR.copies
    assert copies[sealed.image_id] == {"KmsKeyId": key, "Duration": 60}
    assert copies[plain.image_id] == {"KmsKeyId": None, "Duration": 60}


def test_public_sharing_under_ami_block_public_access_names_the_setting(cloud_aws) -> None:
    """Block public access for AMIs (block-new-sharing) "will block any attempt to
    publicly share your AMIs in the specified Region" (EC2 API reference,
    EnableImageBlockPublicAccess): a public share is refused before ModifyImageAttribute,
    naming the setting and how to turn it off; with it off the AMI is public."""
    from imagectl.stacks.schema import Sharing

    env = cloud_aws
    img = env.seed()
    provider = env.provider()
    replica = CloudImage("aws", "us-east-1", img.cloud_image_id)
    ec2 = _ec2(env, "us-east-1")
    ec2.enable_image_block_public_access(ImageBlockPublicAccessState="block-new-sharing")
    with pytest.raises(CloudError) as refused:
        provider.share(replica, Sharing(public=True))
    text = refused.value.render()
    assert "block public access for AMIs" in text and "block-new-sharing" in text
    assert "disable-image-block-public-access --region us-east-1" in text
    perms = ec2.describe_image_attribute(ImageId=img.cloud_image_id, Attribute="launchPermission")
    assert perms["LaunchPermissions"] == []
    # the emulator refuses the share itself too, whoever sends it
    with pytest.raises(Exception, match="OperationNotPermitted"):
        ec2.modify_image_attribute(
            ImageId=img.cloud_image_id, LaunchPermission={"Add": [{"Group": "all"}]}
        )
    ec2.disable_image_block_public_access()
    provider.share(replica, Sharing(public=True))
    perms = ec2.describe_image_attribute(ImageId=img.cloud_image_id, Attribute="launchPermission")
    assert {"Group": "all"} in perms["LaunchPermissions"]
