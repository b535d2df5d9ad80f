"""Google Cloud promotion and fleet reads against the Compute REST fake made as strict as
the API: Pacific-time timestamps, paged lists, ``requestId``, ``images.patch`` limited to
family / description / deprecation, instance GETs without the input-only
``initializeParams`` (the image is the boot disk's ``sourceImage``)."""

from __future__ import annotations

import pytest

from imagectl.clouds.base import CloudImage
from imagectl.clouds.gcp.labels import to_labels
from imagectl.errors import CloudError
from imagectl.stacks.schema import Sharing
from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]

TAGS = {"imagectl:stack": "h100-training"}


def _provider(gcp_fake):
    return CloudEnv("gcp", gcp_fake).provider()


def _family_members(fake, family: str = "h100-training") -> list[dict]:
    return [i for i in fake.images.values() if i.get("family") == family]


def test_one_promoted_image_and_one_family_member_per_promotion(gcp_fake) -> None:
    """Every region's replicate and pointer flip make and name the same single image,
    stored in the stack's storage locations; before, each region made its own family
    member and the last one created won."""
    provider = _provider(gcp_fake)
    gcp_fake.add_image("cand-1", labels=to_labels(TAGS), storage_locations=["us"])
    source = provider.get_image("cand-1", "")
    replicas = {}
    for region in ("us", "europe"):
        status = provider.replicate(source, region, token=f"imagectl-{region}")
        replicas[region] = status.image_id
    assert replicas["us"] == "cand-1"  # the source is stored there already
    for _ in range(3):
        if provider.replica_status(source, "europe").state == "available":
            break
    assert provider.replica_status(source, "europe").state == "available"
    for region, image_id in replicas.items():
        provider.set_pointer("h100-training", region, image_id)
    (member,) = _family_members(gcp_fake)
    assert member["storageLocations"] == ["us", "europe"]
    assert member["name"] == replicas["europe"]
    assert provider.get_pointer("h100-training", "europe") == member["name"]
    inserts = gcp_fake.calls("POST", "/global/images$")
    assert len(inserts) == 1 and inserts[0].query.get("requestId")


def test_rollback_compares_creation_times_not_strings(gcp_fake) -> None:
    """Compute returns creation times with a Pacific offset that changes with daylight
    saving time: 01:10-08:00 is after 01:30-07:00 (2026-11-01, the night PDT ends).
    Rolling back to the 01:30 member must deprecate the 01:10 one."""
    provider = _provider(gcp_fake)
    older, newer = "h100-training-cand-a", "h100-training-cand-b"
    for name, created in (
        (older, "2026-11-01T01:30:00.000-07:00"),
        (newer, "2026-11-01T01:10:00.000-08:00"),
    ):
        gcp_fake.add_image(name, family="h100-training", labels=to_labels(TAGS), created=created)
    assert provider.get_pointer("h100-training", "us") == newer
    provider.set_pointer("h100-training", "us", older)
    assert provider.get_pointer("h100-training", "us") == older
    assert gcp_fake.images[newer]["deprecated"]["state"] == "DEPRECATED"


def test_a_deprecated_member_is_never_made_active_again(gcp_fake) -> None:
    """Compute documents no way back from a deprecation: the pointer refuses a deprecated
    target instead of sending ``state=ACTIVE``."""
    provider = _provider(gcp_fake)
    gcp_fake.add_image("h100-training-cand-c", family="h100-training", labels=to_labels(TAGS))
    gcp_fake.images["h100-training-cand-c"]["deprecated"] = {"state": "DEPRECATED"}
    with pytest.raises(CloudError, match="deprecated"):
        provider.set_pointer("h100-training", "us", "h100-training-cand-c")
    assert not [
        r for r in gcp_fake.calls("POST", "/deprecate$") if (r.body or {}).get("state") == "ACTIVE"
    ]


def test_the_family_image_gets_the_image_users_of_the_source(gcp_fake) -> None:
    provider = _provider(gcp_fake)
    gcp_fake.add_image("cand-2", labels=to_labels(TAGS), storage_locations=["us"])
    source = provider.get_image("cand-2", "")
    provider.share(source, Sharing(principals=["group:ml-platform@example.com"]))
    status = provider.replicate(source, "europe", token="imagectl-t")
    provider.set_pointer("h100-training", "europe", str(status.image_id))
    member = provider.get_pointer("h100-training", "europe")
    bindings = gcp_fake.iam[member]["bindings"]
    assert {"role": "roles/compute.imageUser", "members": ["group:ml-platform@example.com"]} in (
        bindings
    )


def test_an_instance_image_is_read_from_its_boot_disk(gcp_fake) -> None:
    """A fleet instance made by someone else (no imagectl labels): its image comes from
    the boot disk, since GET never returns ``initializeParams``; lists page."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    gcp_fake.add_image("fleet-img", labels=to_labels(TAGS))
    client = compute_v1.InstancesClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcp_fake.endpoint},
    )
    zone = gcp_fake.zones[0]
    for n in range(5):  # more than a page
        client.insert(
            project=gcp_fake.project,
            zone=zone,
            instance_resource=compute_v1.Instance(
                name=f"node-{n}",
                machine_type=f"zones/{zone}/machineTypes/a3-highgpu-8g",
                disks=[
                    compute_v1.AttachedDisk(
                        boot=True,
                        auto_delete=True,
                        initialize_params=compute_v1.AttachedDiskInitializeParams(
                            source_image=f"projects/{gcp_fake.project}/global/images/fleet-img"
                        ),
                    )
                ],
            ),
        )
    for op in list(gcp_fake.operations):
        gcp_fake._complete(op)
    raw = client.get(project=gcp_fake.project, zone=zone, instance="node-0")
    assert not raw.disks[0].initialize_params  # input only, as on the real API
    found = _provider(gcp_fake).list_instances(managed_only=False)
    assert sorted(i.instance_id for i in found) == [f"node-{n}" for n in range(5)]
    assert {i.image_id for i in found} == {"fleet-img"}


def test_a_failed_promoted_image_is_made_again(gcp_fake) -> None:
    provider = _provider(gcp_fake)
    gcp_fake.add_image("cand-3", labels=to_labels(TAGS), storage_locations=["us"])
    source = provider.get_image("cand-3", "")
    first = provider.replicate(source, "europe", token="imagectl-1")
    for op in list(gcp_fake.operations):
        gcp_fake._complete(op)
    gcp_fake.images[str(first.image_id)]["status"] = "FAILED"
    assert provider.replica_status(source, "europe").state == "failed"
    again = provider.replicate(source, "europe", token="imagectl-2")
    assert again.image_id == first.image_id and again.state == "pending"
    assert provider.replica_status(source, "europe").state in ("pending", "available")
    assert isinstance(source, CloudImage)
