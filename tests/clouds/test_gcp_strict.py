"""Google Cloud promotion and fleet reads against the Compute REST fake made as strict as
the API: Pacific-time timestamps, paged lists, ``requestId``, ``images.patch`` limited to
family / description / deprecation, instance GETs without the input-only
``initializeParams`` (the image is the boot disk's ``sourceImage``)."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from typing import Any

import pytest

from imagectl.clouds.base import CloudImage
from imagectl.clouds.gcp.labels import to_labels
from imagectl.stacks.schema import Sharing
from tests.fakes.fixtures import CloudEnv
from tests.fakes.server import Request

pytest_plugins = ["tests.fakes.fixtures"]

TAGS = {"imagectl:stack": "h100-training"}


def _provider(gcp_fake):
    return CloudEnv("gcp", gcp_fake).provider()


def _family_members(fake, family: str = "h100-training") -> list[dict]:
    return [i for i in fake.images.values() if i.get("family") == family]


def test_one_promoted_image_and_one_family_member_per_promotion(gcp_fake) -> None:
    """Every region's replicate and pointer flip make and name the same single image,
    stored in the stack's storage locations, the source's own location included: the
    family resolves to that image, so it is every region's pointer (before, the region
    holding the source recorded the source while the family resolved to the copy)."""
    provider = _provider(gcp_fake)
    gcp_fake.add_image("cand-1", labels=to_labels(TAGS), storage_locations=["us"])
    source = provider.get_image("cand-1", "global")
    replicas = {}
    for region in ("us", "eu"):
        status = provider.replicate(source, region, token=f"imagectl-{region}")
        replicas[region] = status.image_id
    for _ in range(3):
        if provider.replica_status(source, "eu").state == "available":
            break
    assert {provider.replica_status(source, r).state for r in replicas} == {"available"}
    assert replicas["us"] == replicas["eu"] != "cand-1"
    for region, image_id in replicas.items():
        provider.set_pointer("h100-training", region, image_id)
    (member,) = _family_members(gcp_fake)
    assert member["storageLocations"] == ["us", "eu"]
    assert member["name"] == replicas["eu"]
    for region in replicas:
        assert provider.get_pointer("h100-training", region) == member["name"] == replicas[region]
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


def test_a_rolled_back_member_is_made_active_again(gcp_fake) -> None:
    """A deprecation is reversible: "You can revert a deprecation (make an image active
    again), by changing the deprecation state to ACTIVE" (Compute Engine docs, "Deprecate
    a custom image"; gcloud compute images deprecate IMAGE --state=ACTIVE). Rolling back
    deprecates the newer member; rolling forward again makes it ACTIVE and the family
    resolves to it once more."""
    provider = _provider(gcp_fake)
    older, newer = "h100-training-cand-c", "h100-training-cand-d"
    for name, created in (
        (older, "2026-11-20T10:00:00.000-08:00"),
        (newer, "2026-11-21T10:00:00.000-08:00"),
    ):
        gcp_fake.add_image(name, family="h100-training", labels=to_labels(TAGS), created=created)
    provider.set_pointer("h100-training", "us", older)  # rollback
    assert gcp_fake.images[newer]["deprecated"]["state"] == "DEPRECATED"
    assert provider.get_pointer("h100-training", "us") == older
    provider.set_pointer("h100-training", "us", newer)  # and back
    assert provider.get_pointer("h100-training", "us") == newer
    assert "deprecated" not in gcp_fake.images[newer]
    sent = [r.body for r in gcp_fake.calls("POST", f"/{newer}/deprecate$")]
    assert sent[-1]["state"] == "ACTIVE"


def test_set_labels_needs_the_current_fingerprint(gcp_fake) -> None:
    """The fake as strict as the API: a stale labelFingerprint is 412 conditionNotMet and
    each accepted change replaces the fingerprint."""
    from google.api_core.exceptions import PreconditionFailed
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    gcp_fake.add_image("cand-f", labels=to_labels(TAGS))
    client = compute_v1.ImagesClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcp_fake.endpoint},
    )
    first = client.get(project=gcp_fake.project, image="cand-f").label_fingerprint

    def set_labels(fingerprint: str) -> None:
        client.set_labels(
            project=gcp_fake.project,
            resource="cand-f",
            global_set_labels_request_resource=compute_v1.GlobalSetLabelsRequest(
                labels={"a": "b"}, label_fingerprint=fingerprint
            ),
        )

    set_labels(first)
    second = client.get(project=gcp_fake.project, image="cand-f").label_fingerprint
    assert second != first
    with pytest.raises(PreconditionFailed, match="fingerprint"):
        set_labels(first)


def test_parallel_tags_on_one_image_all_land(gcp_fake) -> None:
    """Region threads tag the one promoted image at once: every label lands, no 412
    escapes (the provider serialises per image and re-reads the fingerprint on a 412)."""
    from concurrent.futures import ThreadPoolExecutor

    gcp_fake.add_image("cand-p", labels=to_labels(TAGS))
    providers = [_provider(gcp_fake) for _ in range(2)]  # two processes: no shared lock
    image = providers[0].get_image("cand-p", "global")

    # The race made certain, not left to timing: the next two reads of the image (one per
    # provider: each serialises its own writes) are answered only once both have arrived,
    # so both providers hold the same fingerprint and one setLabels must get the 412.
    both_read = threading.Barrier(2, timeout=30)
    name = re.compile(r"/global/images/(?P<name>cand-p)$")

    def read_together(req: Request) -> Any:
        both_read.wait()
        match = name.search(req.path)
        assert match is not None
        with gcp_fake.lock:
            return gcp_fake._get_image(replace(req, match=match))

    gcp_fake.add_fault(read_together, method="GET", path=name.pattern, times=2)

    def tag(i: int) -> None:
        providers[i % 2].set_tags(image, {f"imagectl:r{i}": "x"})

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(tag, range(6)))
    labels = gcp_fake.images["cand-p"]["labels"]
    assert {f"imagectl-r{i}" for i in range(6)} <= set(labels)
    assert [r for r in gcp_fake.calls("POST", "/setLabels$") if r.status == 412]  # raced


def test_the_fake_refuses_a_storage_location_cloud_storage_lacks(gcp_fake) -> None:
    """images.insert with storageLocations ["europe"]: no such Cloud Storage location
    (the multi-regions are us, eu, asia), so no image."""
    from google.api_core.exceptions import BadRequest

    gcp_fake.add_image("cand-s", labels=to_labels(TAGS), storage_locations=["us"])
    provider = _provider(gcp_fake)
    provider.regions = ["us", "europe"]
    source = provider.get_image("cand-s", "global")
    with pytest.raises(BadRequest, match="storageLocations"):
        provider.replicate(source, "eu", token="imagectl-s")
    assert not [n for n in gcp_fake.images if n != "cand-s"]


def test_the_family_image_gets_the_image_users_of_the_source(gcp_fake) -> None:
    provider = _provider(gcp_fake)
    gcp_fake.add_image("cand-2", labels=to_labels(TAGS), storage_locations=["us"])
    source = provider.get_image("cand-2", "")
    provider.share(source, Sharing(principals=["group:ml-platform@example.com"]))
    status = provider.replicate(source, "eu", token="imagectl-t")
    provider.set_pointer("h100-training", "eu", str(status.image_id))
    member = provider.get_pointer("h100-training", "eu")
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
                            source_image=f"projects/{gcp_fake.project}/global/images/fleet-img",
                            disk_type=f"zones/{zone}/diskTypes/pd-balanced",
                        ),
                    )
                ],
                # what the A3 series takes (the fake refuses the API defaults, as Compute does)
                network_interfaces=[compute_v1.NetworkInterface(nic_type="GVNIC")],
                scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE"),
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
    first = provider.replicate(source, "eu", token="imagectl-1")
    for op in list(gcp_fake.operations):
        gcp_fake._complete(op)
    gcp_fake.images[str(first.image_id)]["status"] = "FAILED"
    assert provider.replica_status(source, "eu").state == "failed"
    again = provider.replicate(source, "eu", token="imagectl-2")
    assert again.image_id == first.image_id and again.state == "pending"
    assert provider.replica_status(source, "eu").state in ("pending", "available")
    assert isinstance(source, CloudImage)
