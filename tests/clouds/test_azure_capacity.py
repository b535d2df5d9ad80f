"""Validation in an Azure capacity reservation group (ND H100 v5 is rarely available on
demand): the stack's ``clouds.azure.validation_capacity`` names the group; the VM is
created with ``capacityReservation.capacityReservationGroup.id`` (Compute REST API,
Virtual Machines - Create Or Update) in the reservation's zone only. Within the reserved
quantity it is allocated even where on-demand capacity is exhausted; beyond it Azure
overallocates like on demand, and "no capacity" then names the group."""

from __future__ import annotations

import pytest

from imagectl.clouds.base import CapacityError
from imagectl.validation.run import NoCapacity
from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]

SIZE = "Standard_ND96isr_H100_v5"


def _provider(env: CloudEnv, group: str, zone: str | None):
    return env.provider_with({"validation_capacity": {"reservation_group": group, "zone": zone}})


def _launch(provider, image, location: str):
    return launch(provider, image, SIZE, location)


def test_validation_uses_the_reservation_and_names_it_when_overallocated(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    build = env.resolved.stack.clouds.azure.build
    group = azure_fake.add_capacity_reservation(
        build.resource_group, "h100-crg", location=build.location, size=SIZE, count=1, zone="2"
    )
    provider = _provider(env, group, "2")
    image = env.seed_candidate()
    (location,) = provider.candidate_locations(image)
    assert location == f"{build.location}/2"
    azure_fake.capacity_error(build.location)  # no on-demand capacity anywhere there
    first = _launch(provider, image, location)  # the reserved VM is allocated anyway
    (put,) = [r for r in azure_fake.calls("PUT", "/virtualMachines/")]
    assert put.body["properties"]["capacityReservation"] == {
        "capacityReservationGroup": {"id": group}
    }
    with pytest.raises(CapacityError) as caught:  # beyond the reserved quantity
        _launch(provider, image, location)
    assert "capacity reservation group h100-crg" in caught.value.location
    assert "capacity reservation group h100-crg" in str(NoCapacity([caught.value]))
    provider.terminate(first)


def test_a_vm_the_group_does_not_reserve_is_refused_clearly(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    build = env.resolved.stack.clouds.azure.build
    group = azure_fake.add_capacity_reservation(
        build.resource_group, "a100-crg", location=build.location, size="Standard_ND96asr_v4",
        count=2, zone="1",
    )  # fmt: skip
    provider = _provider(env, group, "1")
    with pytest.raises(Exception, match="does not match a capacity reservation"):
        _launch(provider, env.seed_candidate(), f"{build.location}/1")
