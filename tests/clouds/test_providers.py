"""Every Provider method on each cloud, through the real SDK against its protocol fake:
find / tag images, launch (security, tags, TTL), list, terminate, and the promotion
primitives (replicate, replica status, share, pointer, deprecate, delete)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from imagectl.stacks.schema import Sharing
from imagectl.tags import TAG_LAUNCHED_BY, TAG_MANAGED, TAG_STACK, TAG_STATE, TAG_TTL
from tests.fakes.fixtures import CloudEnv, launch

TARGET = {"aws": "us-west-2", "gcp": "eu", "azure": "westus3"}


def test_find_images_by_stack_digest_and_state(cloud_env: CloudEnv) -> None:
    a = cloud_env.seed_candidate()
    b = cloud_env.seed_candidate(tags={"imagectl:stack-digest": "f" * 64})
    p = cloud_env.provider()
    digest = cloud_env.resolved.digest
    # Same-second creation times (AWS reports seconds): compare as sets.
    found = {i.image_id for i in p.find_images(stack="h100-training")}
    assert found == {a.image_id, b.image_id}
    assert [i.image_id for i in p.find_images(digest=digest)] == [a.image_id]
    p.tag_state(b, "validating")
    assert [i.image_id for i in p.find_images(state="validating")] == [b.image_id]
    assert p.find_images(stack="other-stack") == []
    assert p.get_image(a.image_id, a.region).tags[TAG_STACK] == "h100-training"


def test_launch_tags_and_locks_down_the_instance(cloud_env: CloudEnv) -> None:
    image = cloud_env.seed_candidate()
    p = cloud_env.provider()
    before = dt.datetime.now(dt.timezone.utc)
    inst = launch(
        p, image, "p5.48xlarge", cloud_env.locations()[0], ttl=dt.timedelta(hours=2),
        launched_by="ci-run-42", ssh_public_key="ssh-ed25519 AAAAC3Nza test",
        allowed_cidr="203.0.113.7/32",
    )  # fmt: skip
    assert inst.tags[TAG_MANAGED] == "true"
    assert inst.tags[TAG_LAUNCHED_BY] == "ci-run-42"
    expires = inst.expires_at()
    assert expires is not None
    assert dt.timedelta(hours=1, minutes=59) <= expires - before <= dt.timedelta(hours=2, minutes=1)
    listed = p.list_instances()
    assert [i.instance_id for i in listed] == [inst.instance_id]
    assert listed[0].tags[TAG_TTL] == inst.tags[TAG_TTL]
    _assert_locked_down(cloud_env, inst)
    ready = p.wait_reachable(inst, timeout_s=5)
    assert ready.address
    p.terminate(inst)
    assert cloud_env.live_instances() == []
    _assert_network_cleaned(cloud_env)


def _assert_locked_down(env: CloudEnv, inst: Any) -> None:
    if env.cloud == "aws":
        import boto3

        ec2 = boto3.client("ec2", region_name="us-east-1")
        raw = ec2.describe_instances(InstanceIds=[inst.instance_id])["Reservations"][0][
            "Instances"
        ][0]
        assert raw["MetadataOptions"]["HttpTokens"] == "required"
        assert "IamInstanceProfile" not in raw
        # an EFA shape names its group on its interfaces (moto lists it there only)
        groups = raw["SecurityGroups"] or raw["NetworkInterfaces"][0]["Groups"]
        group = groups[0]["GroupId"]
        perms = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["IpPermissions"]
        # SSH from the runner only; an EFA shape's group also admits its own members
        assert [
            (p["FromPort"], [r["CidrIp"] for r in p["IpRanges"]])
            for p in perms
            if p["IpProtocol"] != "-1"
        ] == [(22, ["203.0.113.7/32"])]
        assert all(
            [g["GroupId"] for g in p["UserIdGroupPairs"]] == [group] and not p["IpRanges"]
            for p in perms
            if p["IpProtocol"] == "-1"
        )
    elif env.cloud == "gcp":
        fw = env.fake.firewalls[f"{inst.instance_id}-ssh"]
        assert fw["sourceRanges"] == ["203.0.113.7/32"]
        assert fw["targetTags"] == [inst.instance_id]
        body = env.fake.instances[(inst.region, inst.instance_id)]
        assert body.get("serviceAccounts", []) == []
        assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    else:
        nsg = next(
            r for k, r in env.fake.resources.items() if k.endswith(f"{inst.instance_id}-nsg")
        )
        rules = nsg["properties"]["securityRules"]
        assert [
            (r["properties"]["sourceAddressPrefix"], r["properties"]["destinationPortRange"])
            for r in rules
        ] == [("203.0.113.7/32", "22")]
        vm = next(r for k, r in env.fake.resources.items() if k.endswith(f"/{inst.instance_id}"))
        assert "identity" not in vm
        linux = vm["properties"]["osProfile"]["linuxConfiguration"]
        assert linux["disablePasswordAuthentication"] is True


def _assert_network_cleaned(env: CloudEnv) -> None:
    if env.cloud == "gcp":
        assert env.fake.firewalls == {}
    elif env.cloud == "azure":
        left = [
            k
            for k in env.fake.resources
            if "/microsoft.network/" in k and "virtualnetworks" not in k
        ]
        assert left == []


def test_replicate_is_idempotent_and_reports_status(cloud_env: CloudEnv) -> None:
    image = cloud_env.seed_candidate()
    p = cloud_env.provider()
    region = TARGET[cloud_env.cloud]
    assert p.replica_status(image, region).state == "missing"
    first = p.replicate(image, region, token="promo-1")
    assert first.state in ("pending", "available")
    again = p.replicate(image, region, token="promo-1")
    assert again.image_id == first.image_id
    final = p.replica_status(image, region)
    assert final.state == "available" and final.image_id == first.image_id
    if cloud_env.cloud == "aws":
        copy = p.get_image(first.image_id, region)
        assert copy.tags[TAG_STACK] == "h100-training"  # tags copied by imagectl
        assert copy.tags["imagectl:source-image"] == image.image_id


def test_share_never_public_unless_asked(cloud_env: CloudEnv) -> None:
    image = cloud_env.seed_candidate()
    p = cloud_env.provider()
    if cloud_env.cloud == "aws":
        import boto3

        p.share(image, Sharing(accounts=["111122223333"]))
        perms = boto3.client("ec2", region_name="us-east-1").describe_image_attribute(
            ImageId=image.image_id, Attribute="launchPermission"
        )["LaunchPermissions"]
        assert perms == [{"UserId": "111122223333"}]
    elif cloud_env.cloud == "gcp":
        p.share(image, Sharing(principals=["group:ml@example.com"]))
        policy = cloud_env.fake.iam[image.image_id]
        assert policy["bindings"] == [
            {"role": "roles/compute.imageUser", "members": ["group:ml@example.com"]}
        ]
    else:  # a direct shared gallery (created with sharingProfile.permissions Groups)
        gallery = cloud_env.resolved.stack.clouds.azure.gallery
        cloud_env.fake.set_gallery_permissions(gallery.resource_group, gallery.name, "Groups")
        p.share(image, Sharing(principals=["11111111-2222-3333-4444-555555555555"]))
        (groups,) = cloud_env.fake.sharing.values()
        assert groups == [
            {"type": "Subscriptions", "ids": ["11111111-2222-3333-4444-555555555555"]}
        ]


def test_pointer_moves_forward_and_back(cloud_env: CloudEnv) -> None:
    old = cloud_env.seed_candidate()
    new = cloud_env.seed_candidate()
    p = cloud_env.provider()
    region = {"aws": "us-east-1", "gcp": "us", "azure": "eastus"}[cloud_env.cloud]
    assert p.get_pointer("h100-training", region) is None
    p.set_pointer("h100-training", region, old.image_id)
    first = p.get_pointer("h100-training", region)
    p.set_pointer("h100-training", region, new.image_id)
    second = p.get_pointer("h100-training", region)
    assert first and second and first != second
    assert new.image_id in second if cloud_env.cloud != "azure" else second == new.image_id
    p.set_pointer("h100-training", region, old.image_id)  # rollback
    assert p.get_pointer("h100-training", region) == first


def test_deprecate_and_delete(cloud_env: CloudEnv) -> None:
    image = cloud_env.seed_candidate()
    p = cloud_env.provider()
    p.deprecate(image)
    after = p.get_image(image.image_id, image.region)
    if cloud_env.cloud == "aws":
        assert after.tags[TAG_STATE] == "deprecated"
        # EC2 takes no deprecation time in the past: "now" is the next minute
        import boto3

        ec2 = boto3.client("ec2", region_name=image.region)
        (raw,) = ec2.describe_images(ImageIds=[image.image_id])["Images"]
        assert raw.get("DeprecationTime"), raw
    else:
        assert after.state == "deprecated"
    p.delete(image)
    assert p.get_image(image.image_id, image.region) is None
    p.delete(image)  # deleting twice is fine


def test_gcp_reaps_a_killed_runs_ssh_rule_only_after_its_ttl_and_its_instance(
    gcp_fake: Any,
) -> None:
    """A run killed with -9 leaves its per-instance firewall rule (a Firewall has no
    labels, so the TTL is in its description). The reaper deletes it once the TTL passed
    and no instance wears its target tag; never a rule of a live instance, never one
    imagectl did not write."""
    cloud_env = CloudEnv("gcp", gcp_fake)
    image = cloud_env.seed_candidate()
    p = cloud_env.provider()
    zone = cloud_env.locations()[0]
    dead, alive = (
        launch(p, image, "a3-highgpu-8g", zone, ttl=dt.timedelta(hours=2), launched_by="ci",
               allowed_cidr="203.0.113.7/32")
        for _ in range(2)
    )  # fmt: skip
    cloud_env.fake.firewalls["allow-ssh-from-office"] = {
        "name": "allow-ssh-from-office", "description": "the team's own rule",
        "targetTags": ["office"], "sourceRanges": ["198.51.100.0/24"],
    }  # fmt: skip
    del cloud_env.fake.instances[(dead.region, dead.instance_id)]  # gone; its rule is not
    soon = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5)
    assert p.reap_orphans(now=soon) == []  # TTL not passed yet
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=3)
    listed = p.reap_orphans(now=later, dry_run=True)
    assert [r.instance_id for r in listed] == [f"{dead.instance_id}-ssh"]
    assert f"{dead.instance_id}-ssh" in cloud_env.fake.firewalls  # dry run deletes nothing
    reaped = p.reap_orphans(now=later)
    assert [(r.instance_id, r.shape) for r in reaped] == [(f"{dead.instance_id}-ssh", "firewall")]
    assert set(cloud_env.fake.firewalls) == {f"{alive.instance_id}-ssh", "allow-ssh-from-office"}
    p.terminate(alive)
