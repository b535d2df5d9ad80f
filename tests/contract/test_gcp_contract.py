"""Every request the Google Cloud provider sends to the Compute fake, and every answer the
fake gives, checked against the Compute v1 API description (``compute_schema.py``): a
field the API does not have, an output-only field sent, or an input-only field returned
(e.g. ``initializeParams`` in an instance GET) fails."""

from __future__ import annotations

import datetime as dt
import re

from imagectl.stacks.schema import Sharing
from tests.contract.compute_schema import problems
from tests.fakes.fixtures import CloudEnv, launch, placement

pytest_plugins = ["tests.fakes.fixtures"]

# (method, path pattern) -> the request body's message type
REQUESTS = [
    ("POST", r"/global/images$", "Image"),
    ("PATCH", r"/global/images/[^/]+$", "Image"),
    ("POST", r"/deprecate$", "DeprecationStatus"),
    ("POST", r"/setLabels$", "GlobalSetLabelsRequest"),
    ("POST", r"/setIamPolicy$", "GlobalSetPolicyRequest"),
    ("POST", r"/zones/[^/]+/instances$", "Instance"),
    ("POST", r"/global/firewalls$", "Firewall"),
    ("POST", r"/regions/[^/]+/resourcePolicies$", "ResourcePolicy"),
]
# "kind" of a response -> its message type
KINDS = {
    "compute#image": "Image",
    "compute#imageList": "ImageList",
    "compute#operation": "Operation",
    "compute#instance": "Instance",
    "compute#instanceList": "InstanceList",
    "compute#instanceAggregatedList": "InstanceAggregatedList",
    "compute#disk": "Disk",
    "compute#zoneList": "ZoneList",
    "compute#firewall": "Firewall",
    "compute#resourcePolicy": "ResourcePolicy",
    "compute#resourcePolicyAggregatedList": "ResourcePolicyAggregatedList",
}


def _exercise(fake) -> None:
    """What imagectl does on Google Cloud: promotion, rollback, a validation launch."""
    env = CloudEnv("gcp", fake)
    provider = env.provider()
    old, new = env.seed_candidate(), env.seed_candidate()
    for image in (old, new):
        provider.share(image, Sharing(principals=["group:ml@example.com"]))
        status = provider.replicate(image, "eu", token=f"imagectl-{image.image_id}")
        while provider.replica_status(image, "eu").state == "pending":
            pass
        for region, replica in (("us", image.image_id), ("eu", status.image_id)):
            provider.set_pointer("h100-training", region, str(replica))
        provider.tag_state(image, "promoted")
    provider.set_pointer("h100-training", "us", old.image_id)  # rollback
    provider.deprecate(new)
    zone = env.locations()[0]
    inst = launch(
        provider, old, "a3-highgpu-8g", zone, launched_by="contract",
        ssh_public_key="ssh-ed25519 AAAA contract", allowed_cidr="203.0.113.0/24",
    )  # fmt: skip
    provider.wait_reachable(inst, timeout_s=30)
    assert provider.list_instances(managed_only=False)
    provider.terminate(inst)
    # a validation launch into a specific reservation (reservationAffinity)
    fake.add_reservation(zone, "h100-pool", machine_type="a3-highgpu-8g", count=1)
    reserved = env.provider_with(
        {"validation_capacity": {"reservation": "h100-pool", "zone": zone}}
    )
    inst = launch(reserved, old, "a3-highgpu-8g", zone, launched_by="contract")
    reserved.terminate(inst)
    # a multi-node run's placement, and the reaper's listing of the ones left behind
    for name in ("imagectl-contract-1", "imagectl-contract-2", "imagectl-contract-3"):
        placement(provider, old, "a3-highgpu-8g", zone, name=name, ttl=dt.timedelta(hours=-1),
                  launched_by="contract")  # fmt: skip
    placements = provider.list_placements()
    assert len(placements) == 3
    provider.delete_placement(placements[0].placement)


def test_requests_and_responses_follow_the_compute_api(gcp_fake) -> None:
    _exercise(gcp_fake)
    found: list[str] = []
    checked = 0
    for logged in gcp_fake.requests:
        if logged.status >= 400:
            continue
        for method, pattern, type_name in REQUESTS:
            if logged.method == method and re.search(pattern, logged.path):
                found += problems(logged.body, type_name, direction="request")
                checked += 1
        response = logged.response
        if isinstance(response, dict):
            kind = response.get("kind")
            if kind in KINDS:
                found += problems(response, KINDS[kind], direction="response")
                checked += 1
            elif logged.path.endswith("IamPolicy"):
                found += problems(response, "Policy", direction="response")
                checked += 1
    assert not found, "\n".join(sorted(set(found)))
    assert checked > 30  # the scenario really went through the fake


def test_the_checker_catches_an_input_only_field_in_a_response() -> None:
    """The check itself: the discovery document's ``[Input Only]`` / ``[Output Only]``
    marks and unknown fields are seen (AttachedDisk.initializeParams is input only)."""
    instance = {"name": "i", "disks": [{"boot": True, "initializeParams": {"sourceImage": "x"}}]}
    assert problems(instance, "Instance", direction="response") == [
        "Instance.disks > AttachedDisk.initializeParams: input only, returned in a response"
    ]
    assert problems({"name": "i", "creationTimestamp": "t"}, "Image", direction="request") == [
        "Image.creationTimestamp: output only, sent in a request"
    ]
    assert problems({"nmae": "i"}, "Image", direction="response") == [
        "Image.nmae: not a field of Image"
    ]
