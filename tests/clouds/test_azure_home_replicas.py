"""Azure's home region gets the stack's replica count like every other region: the build
publishes it with ``shared_image_gallery_replica_count`` (images/azure/candidate.pkr.hcl),
and a promotion brings a listed region that holds fewer replicas (a version published
before, or by Packer 1.6.6) to the stack's count ("Each target region has its own
regionalReplicaCount": Azure Compute Gallery overview, "Scaling")."""

from __future__ import annotations

from typing import Any

from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]


def _targets(fake: Any, image_id: str) -> dict[str, int]:
    body = fake.resources[fake._key(image_id)]
    return {t["name"]: int(t["regionalReplicaCount"])
            for t in body["properties"]["publishingProfile"]["targetRegions"]}  # fmt: skip


def test_promotion_brings_the_home_region_to_the_stacks_replica_count(azure_fake: Any) -> None:
    env = CloudEnv("azure", azure_fake)
    image = env.seed_candidate()  # published in its home region with one replica
    provider = env.provider()
    provider.replica_count = 3
    home = image.region
    assert set(_targets(azure_fake, image.image_id).values()) == {1}
    provider.replicate(image, home, token="t")
    provider.wait_writable(image.image_id)
    assert set(_targets(azure_fake, image.image_id).values()) == {3}  # the home region
    other = next(r for r in provider.regions if r.replace(" ", "").lower() != home.lower())
    provider.replicate(image, other, token="t")
    provider.wait_writable(image.image_id)
    assert set(_targets(azure_fake, image.image_id).values()) == {3}
    assert len(_targets(azure_fake, image.image_id)) >= 2
