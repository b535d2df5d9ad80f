"""Azure allocates a VM after accepting its PUT: the create answers 201, and the
long-running operation ends Failed with AllocationFailed / ZonalAllocationFailed /
OverconstrainedAllocationRequest ("Troubleshoot allocation failures when you create,
restart, or resize VMs in Azure", Microsoft Learn). That is "no capacity here": the run
tries the next location and is inconclusive when none has capacity, never a refused
image; the half-made VM and its NIC are removed."""

from __future__ import annotations

import pytest

from imagectl.clouds.base import CapacityError
from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]


def _launch(provider, image, location: str):
    return launch(provider, image, "Standard_ND96isr_H100_v5", location)


@pytest.mark.parametrize(
    "code", ["AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest"]
)
def test_an_allocation_failure_in_the_operation_is_no_capacity(azure_fake, code: str) -> None:
    env = CloudEnv("azure", azure_fake)
    image = env.seed_candidate()
    provider = env.provider()
    location = env.locations()[0]
    azure_fake.allocation_failure(location.split("/")[0], code, times=1)
    with pytest.raises(CapacityError) as info:
        _launch(provider, image, location)
    assert code in info.value.detail and info.value.location == location
    assert env.live_instances() == []
    nics = [k for k in azure_fake.resources if "/networkinterfaces/" in k]
    assert nics == [], "the failed VM's NIC was left behind"
    # the next attempt (capacity back) creates the VM
    instance = _launch(provider, image, location)
    assert env.live_instances() == [instance.instance_id]
