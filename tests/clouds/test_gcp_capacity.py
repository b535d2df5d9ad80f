"""Validation on a GCP reservation (A3 H100 shapes are rarely available on demand): the
stack's ``clouds.gcp.validation_capacity`` names a specific reservation; instances are
created with ``reservationAffinity`` SPECIFIC_RESERVATION, key
``compute.googleapis.com/reservation-name`` (Compute API reference, ReservationAffinity),
in the reservation's zone only, and a full reservation is "no capacity" naming it."""

from __future__ import annotations

import pytest

from imagectl.clouds.base import CapacityError
from imagectl.validation.run import NoCapacity
from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]

SHAPE = "a3-highgpu-8g"


def _provider(env: CloudEnv, reservation: str, zone: str):
    return env.provider_with({"validation_capacity": {"reservation": reservation, "zone": zone}})


def _launch(provider, image, zone: str):
    return launch(provider, image, SHAPE, zone)


def test_validation_consumes_the_reservation_and_names_it_when_full(gcp_fake) -> None:
    env = CloudEnv("gcp", gcp_fake)
    zone = gcp_fake.zones[1]
    gcp_fake.add_reservation(zone, "h100-validation", machine_type=SHAPE, count=1)
    provider = _provider(env, "h100-validation", zone)
    image = env.seed_candidate()
    assert provider.candidate_locations(image) == [zone]  # not the build zone first
    first = _launch(provider, image, zone)
    (sent,) = [r for r in gcp_fake.calls("POST", "/instances$")]
    assert sent.body["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["h100-validation"],
    }
    with pytest.raises(CapacityError) as caught:  # the reservation has no VM left
        _launch(provider, image, zone)
    assert "reservation h100-validation" in caught.value.location
    assert "does not have available resources" in caught.value.detail
    assert "reservation h100-validation" in str(NoCapacity([caught.value]))
    provider.terminate(first)


def test_a_missing_reservation_is_a_clear_error_naming_it(gcp_fake) -> None:
    env = CloudEnv("gcp", gcp_fake)
    zone = gcp_fake.zones[0]
    provider = _provider(env, "no-such-reservation", zone)
    with pytest.raises(Exception, match="no-such-reservation"):
        _launch(provider, env.seed_candidate(), zone)


def test_the_stack_refuses_a_malformed_reservation() -> None:
    from pydantic import ValidationError

    from imagectl.clouds.gcp.stack import GcpCapacity

    GcpCapacity(reservation="projects/other-project/reservations/h100-pool", zone="us-east5-a")
    with pytest.raises(ValidationError):
        GcpCapacity(reservation="Bad_Name!", zone="us-east5-a")
