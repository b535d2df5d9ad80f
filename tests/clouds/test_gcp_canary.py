"""The canary pointer on Google Cloud: a second image family,
``<family>-canary`` (one family resolves to one image: its newest non-deprecated member,
Compute Engine "Image families"). The validated source joins it; a newer canary
deprecates nothing older; going back deprecates the newer member so the family resolves
to the one before, or to nothing; latest's family is never touched, and an image already
in latest's family cannot also be the canary. On the Compute fake."""

from __future__ import annotations

from typing import Any

import pytest

from imagectl.core.errors import CloudError
from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

STACK = "h100-training"


def test_the_canary_is_a_second_family(gcp_fake: Any) -> None:
    env = CloudEnv("gcp", gcp_fake)
    provider = env.provider()
    region = env.resolved.stack.clouds.gcp.regions[0]
    old, first, second = env.seed_candidate(), env.seed_candidate(), env.seed_candidate()
    provider.set_pointer(STACK, region, old.image_id)
    latest = provider.get_pointer(STACK, region)
    assert latest is not None and provider.get_canary_pointer(STACK, region) is None
    provider.set_canary_pointer(STACK, region, first.image_id)
    assert provider.get_canary_pointer(STACK, region) == first.image_id
    provider.set_canary_pointer(STACK, region, second.image_id)
    assert provider.get_canary_pointer(STACK, region) == second.image_id
    # back to the first: the newer member is deprecated, the family resolves to the older
    provider.set_canary_pointer(STACK, region, first.image_id)
    assert provider.get_canary_pointer(STACK, region) == first.image_id
    provider.set_canary_pointer(STACK, region, None)
    assert provider.get_canary_pointer(STACK, region) is None
    assert provider.get_pointer(STACK, region) == latest  # latest never moved
    # latest's member is in latest's family: it cannot be the canary too
    with pytest.raises(CloudError, match="one image has one family"):
        provider.set_canary_pointer(STACK, region, latest)
    # a canary that was removed can come back (made ACTIVE again)
    provider.set_canary_pointer(STACK, region, second.image_id)
    assert provider.get_canary_pointer(STACK, region) == second.image_id
