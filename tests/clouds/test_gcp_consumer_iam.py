"""A consumer in another project reads "latest" with ``images.getFromFamily``; the fake
judges that read by the IAM policy of the image the family resolves to, as Compute does
(``roles/compute.imageUser`` holds compute.images.getFromFamily: "Manage access to custom
images", Compute Engine docs). Promotion and rollback must leave the resolved image
readable by the stack's sharing principals."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.oauth2.credentials import Credentials

from imagectl.clouds.gcp.compute_sdk import compute_v1
from imagectl.clouds.gcp.labels import to_labels
from imagectl.stacks.schema import Sharing
from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

TAGS = {"imagectl:stack": "h100-training"}
CONSUMER = "group:ml-platform@example.com"


def _consumer_latest(fake) -> str:
    client = compute_v1().ImagesClient(
        credentials=Credentials(token="consumer-token"),
        client_options={"api_endpoint": fake.endpoint},
        transport="rest",
    )
    return str(client.get_from_family(project=fake.project, family="h100-training").name)


def _promote(fake, provider, candidate: str, created: str) -> str:
    fake.add_image(candidate, labels=to_labels(TAGS), storage_locations=["us"], created=created)
    source = provider.get_image(candidate, "")
    provider.share(source, Sharing(principals=[CONSUMER]))
    status = provider.replicate(source, "eu", token=f"imagectl-{candidate}")
    for op in list(fake.operations):
        fake._complete(op)
    provider.set_pointer("h100-training", "eu", str(status.image_id))
    return str(status.image_id)


def test_a_consumer_reads_latest_only_through_the_resolved_images_iam(gcp_fake) -> None:
    gcp_fake.add_consumer("consumer-token", CONSUMER)
    gcp_fake.add_image("h100-training-unshared", family="h100-training", labels=to_labels(TAGS))
    with pytest.raises(gexc.Forbidden, match="getFromFamily"):
        _consumer_latest(gcp_fake)

    provider = CloudEnv("gcp", gcp_fake).provider()
    first = _promote(gcp_fake, provider, "cand-a", "2026-11-20T01:00:00.000-08:00")
    assert _consumer_latest(gcp_fake) == first
    second = _promote(gcp_fake, provider, "cand-b", "2026-11-21T01:00:00.000-08:00")
    assert _consumer_latest(gcp_fake) == second

    # rollback: the family resolves to the first promoted image, still readable
    provider.set_pointer("h100-training", "eu", first)
    assert _consumer_latest(gcp_fake) == first


def test_rollback_to_an_image_shared_after_its_promotion_grants_it_again(gcp_fake) -> None:
    """The pointer flip copies the source's imageUser members onto the image the family
    resolves to every time, so sharing added later reaches a rollback target too."""
    gcp_fake.add_consumer("consumer-token", CONSUMER)
    provider = CloudEnv("gcp", gcp_fake).provider()
    gcp_fake.add_image("cand-c", labels=to_labels(TAGS), storage_locations=["us"])
    source = provider.get_image("cand-c", "")
    status = provider.replicate(source, "eu", token="imagectl-c")
    for op in list(gcp_fake.operations):
        gcp_fake._complete(op)
    provider.set_pointer("h100-training", "eu", str(status.image_id))
    with pytest.raises(gexc.Forbidden):
        _consumer_latest(gcp_fake)
    provider.share(source, Sharing(principals=[CONSUMER]))
    provider.set_pointer("h100-training", "eu", str(status.image_id))
    assert _consumer_latest(gcp_fake) == status.image_id
