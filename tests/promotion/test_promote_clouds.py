"""Promotion of the h100-training stack against moto (AWS) and the local Google Cloud and
Azure API servers: the production providers, over HTTP, driven by the same orchestration."""

from __future__ import annotations

from imagectl.catalog import repository as repo
from imagectl.promotion import promote, rollback
from imagectl.promotion.retention import apply_retention


def _pointers(cloud, provider) -> dict[str, str | None]:
    return {r: provider.get_pointer("h100-training", r) for r in cloud.regions}


def _catalog_pointers(cloud) -> dict[str, str]:
    with cloud.catalog.transaction() as s:
        return {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack="h100-training", cloud=cloud.cloud)
        }


def _events(cloud, kind: str) -> list:
    with cloud.catalog.transaction() as s:
        return repo.events(s, kind=kind, cloud=cloud.cloud)


def test_promote_replicates_and_flips_pointer(cloud) -> None:
    img = cloud.seed()
    provider = cloud.provider()
    result = promote(cloud.catalog, provider, cloud.resolved, img.id, poll_s=0.01)
    assert result.state == "promoted", result.regions
    assert set(result.regions) == set(cloud.regions)
    catalog_ptrs = _catalog_pointers(cloud)
    assert set(catalog_ptrs) == set(cloud.regions)
    for region in cloud.regions:
        replica = result.regions[region].replica_id
        assert catalog_ptrs[region] == replica
        assert (
            provider.replica_status(
                provider.get_image(img.cloud_image_id, img.region) or _source(provider, img), region
            ).state
            == "available"
        )
        assert cloud.count_copies(img.cloud_image_id, region) <= 1
    cloud_ptrs = _pointers(cloud, provider)
    assert all(p is not None for p in cloud_ptrs.values()), cloud_ptrs
    # SSM parameter / exclude_from_latest per region; on Google Cloud the family, which
    # every region shares and which resolves to the promotion's one image (the region
    # holding the source included)
    assert cloud_ptrs == catalog_ptrs
    assert len(_events(cloud, "promotion.pointer.flipped")) == 1


def _source(provider, img):
    from imagectl.clouds.base import CloudImage

    return CloudImage(cloud=img.cloud, region=img.region, image_id=img.cloud_image_id)


def test_region_failing_for_good_then_healed(cloud) -> None:
    old = cloud.seed()
    assert (
        promote(cloud.catalog, cloud.provider(), cloud.resolved, old.id, poll_s=0.01).state
        == "promoted"
    )
    before = _pointers(cloud, cloud.provider())
    old_pointers = _catalog_pointers(cloud)
    new = cloud.seed()
    bad = cloud.regions[-1]
    cloud.fail(bad)
    for _ in range(2):  # fails for good: partial, the pointer stays on the old image
        result = promote(cloud.catalog, cloud.provider(), cloud.resolved, new.id, poll_s=0.01)
        assert result.state in ("partially_promoted", "failed"), result.regions
        assert result.regions[bad].state == "failed"
        assert result.resume_command and "--stack h100-training" in result.resume_command
        assert _pointers(cloud, cloud.provider()) == before
        assert _catalog_pointers(cloud) == old_pointers  # unchanged in every region
    cloud.heal(bad)
    result = promote(cloud.catalog, cloud.provider(), cloud.resolved, new.id, poll_s=0.01)
    assert result.state == "promoted", result.regions
    # on Google Cloud every region's replica is the promotion's one image: its failed
    # insert failed every region, so there was no partial promotion to resume
    assert result.resumed or cloud.cloud == "gcp"
    for region in cloud.regions:
        assert cloud.count_copies(new.cloud_image_id, region) <= 1
    assert _catalog_pointers(cloud) == {r: result.regions[r].replica_id for r in cloud.regions}


def test_rollback_and_retention(cloud) -> None:
    images = [cloud.seed() for _ in range(3)]
    provider = cloud.provider()
    for img in images:
        result = promote(
            cloud.catalog, provider, cloud.resolved, img.id, poll_s=0.01, retention=False
        )
        assert result.state == "promoted", result.regions
    third = _catalog_pointers(cloud)
    back = rollback(cloud.catalog, provider, "h100-training", reason="bad driver")
    second = _catalog_pointers(cloud)
    assert second != third and set(back.moved) == set(cloud.regions)
    assert _pointers(cloud, provider) == second
    with cloud.catalog.transaction() as s:
        assert repo.get_image(s, images[2].id).state == "rolled_back"
        assert repo.get_image(s, images[1].id).state == "promoted"
    outcome = apply_retention(cloud.catalog, provider, "h100-training", cloud.cloud, keep_last=1)
    assert outcome.deprecated, outcome.skipped
    with cloud.catalog.transaction() as s:  # every region row of images[0], nothing else
        group = [
            r
            for r in repo.list_images(s, stack="h100-training", cloud=cloud.cloud)
            if r.id == images[0].id or r.tags.get("imagectl:source-image") == images[0].id
        ]
        assert group and all(r.state == "deprecated" for r in group)
    assert sorted(line.split(" (")[0] for line in outcome.deprecated) == sorted(
        f"{r.cloud_image_id} in {r.region}" for r in group
    )
    with cloud.catalog.transaction() as s:
        assert repo.get_image(s, images[0].id).state == "deprecated"
        assert repo.get_image(s, images[1].id).state == "promoted"  # named by the pointers
    if cloud.cloud == "aws":  # EnableImageDeprecation was called, and the image tagged
        import boto3

        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=cloud.endpoint)
        (raw,) = ec2.describe_images(ImageIds=[images[0].cloud_image_id])["Images"]
        tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
        assert tags["imagectl:state"] == "deprecated" and "imagectl:deprecated-at" in tags
        assert raw.get("DeprecationTime"), raw
