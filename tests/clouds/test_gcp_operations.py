"""Compute operations that fail. The real API answers the call itself with 200 and a
RUNNING operation; a failure shows only in the finished operation's ``error`` and
``httpErrorStatusCode`` (Compute API reference, "Operation" resource; "Handling API
responses": "the operation resource ... error: [Output Only] If errors are generated
during processing of the operation, this field will be populated"). Nothing may be taken
for done because the call was accepted."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc

from imagectl.clouds.gcp.labels import to_labels
from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

TAGS = {"imagectl:stack": "h100-training"}


def _provider(gcp_fake):
    return CloudEnv("gcp", gcp_fake).provider()


def _finish_all(fake) -> None:
    for op in list(fake.operations):
        fake._complete(op)


def test_a_failed_image_insert_is_a_failed_copy_with_its_reason(gcp_fake) -> None:
    """images.insert accepted, then its operation ends QUOTA_EXCEEDED and no image is
    left: the copy is 'failed' with the operation's reason (before: 'missing', and the
    promotion said only that the copy disappeared)."""
    provider = _provider(gcp_fake)
    gcp_fake.add_image("cand-9", labels=to_labels(TAGS), storage_locations=["us"])
    gcp_fake.fail_operation("insert", "QUOTA_EXCEEDED", on="/global/images/", status=403)
    source = provider.get_image("cand-9", "")
    first = provider.replicate(source, "eu", token="imagectl-1")
    assert first.state == "pending"
    _finish_all(gcp_fake)
    status = provider.replica_status(source, "eu")
    assert status.state == "failed"
    assert "QUOTA_EXCEEDED" in status.detail and "images.insert" in status.detail
    # a retry with a new token makes the image (the failure was once)
    again = provider.replicate(source, "eu", token="imagectl-2")
    _finish_all(gcp_fake)
    assert provider.replica_status(source, "eu").state == "available"
    assert again.image_id == first.image_id


def test_a_failed_family_join_is_an_error_and_the_pointer_does_not_move(gcp_fake) -> None:
    provider = _provider(gcp_fake)
    gcp_fake.add_image("h100-training-old", family="h100-training", labels=to_labels(TAGS))
    gcp_fake.add_image("cand-10", labels=to_labels(TAGS), storage_locations=["us"])
    gcp_fake.fail_operation("patch", "INTERNAL_ERROR", on="/global/images/")
    with pytest.raises(gexc.GoogleAPICallError) as info:
        provider.set_pointer("h100-training", "us", "cand-10")
    # the error names the operation and the image it was on
    assert "patch" in str(info.value) and "global/images/" in str(info.value)
    assert "INTERNAL_ERROR" in str(info.value)
    assert provider.get_pointer("h100-training", "us") == "h100-training-old"


def test_a_failed_deprecation_in_a_rollback_is_an_error_not_a_rollback(gcp_fake) -> None:
    """Rolling back deprecates the newer member; when that operation fails the family
    still resolves to the newer image and the caller is told so."""
    provider = _provider(gcp_fake)
    for name, created in (
        ("h100-training-a", "2026-11-01T01:00:00.000-07:00"),
        ("h100-training-b", "2026-11-02T01:00:00.000-08:00"),
    ):
        gcp_fake.add_image(name, family="h100-training", labels=to_labels(TAGS), created=created)
    gcp_fake.fail_operation("deprecate", "RESOURCE_NOT_READY", status=400)
    with pytest.raises(gexc.GoogleAPICallError, match="RESOURCE_NOT_READY"):
        provider.set_pointer("h100-training", "us", "h100-training-a")
    assert provider.get_pointer("h100-training", "us") == "h100-training-b"
    assert "deprecated" not in gcp_fake.images["h100-training-b"]
