"""The canary pointer on Azure: the gallery image version tagged
``imagectl:canary=true``. The candidate version stays excluded from latest (Azure Compute
Gallery: "latest" resolves to the highest version not excluded), so the canary fleet
names the tagged version explicitly; moving the canary moves the tag, going back to none
removes it, and latest never moves. On the ARM fake."""

from __future__ import annotations

from typing import Any

from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

STACK = "h100-training"


def test_the_canary_is_a_tagged_version_outside_latest(azure_fake: Any) -> None:
    env = CloudEnv("azure", azure_fake)
    provider = env.provider()
    old, first, second = env.seed_candidate(), env.seed_candidate(), env.seed_candidate()
    region = old.region
    provider.set_pointer(STACK, region, old.image_id)
    assert provider.get_pointer(STACK, region) == old.image_id
    assert provider.get_canary_pointer(STACK, region) is None
    provider.set_canary_pointer(STACK, region, first.image_id)
    assert provider.get_canary_pointer(STACK, region) == first.image_id
    provider.set_canary_pointer(STACK, region, second.image_id)
    assert provider.get_canary_pointer(STACK, region) == second.image_id
    tagged = [i.image_id for i in provider.find_images(stack=STACK)
              if i.tags.get("imagectl:canary") == "true"]  # fmt: skip
    assert tagged == [second.image_id]  # one canary: the tag moved
    provider.set_canary_pointer(STACK, region, None)
    assert provider.get_canary_pointer(STACK, region) is None
    assert provider.get_pointer(STACK, region) == old.image_id  # latest never moved
