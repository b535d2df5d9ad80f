"""What the Azure provider sends to the ARM fake and what the fake answers for Compute
resources (gallery image versions, virtual machines, proximity placement groups), checked
against ``azure-mgmt-compute``'s models of Azure's REST specs (``arm_schema.py``): a field
the API does not have, or a read-only field sent, fails. (Network resources are answered in
``azure-mgmt-network``'s older model format; they are not checked here.)"""

from __future__ import annotations

import datetime as dt
import re

from tests.contract.arm_schema import problems
from tests.fakes.fixtures import CloudEnv, launch, placement

pytest_plugins = ["tests.fakes.fixtures"]

SIZE = "Standard_ND96isr_H100_v5"


def _models() -> dict[str, object]:
    from azure.mgmt.compute import models

    return {
        "microsoft.compute/galleries/images/versions": models.GalleryImageVersion,
        "microsoft.compute/virtualmachines": models.VirtualMachine,
        "microsoft.compute/galleries/images": models.GalleryImage,
        "microsoft.compute/proximityplacementgroups": models.ProximityPlacementGroup,
    }


def _request_models() -> list[tuple[str, object]]:
    from azure.mgmt.compute import models

    return [
        (r"/galleries/[^/]+/images/[^/]+/versions/[^/]+$", models.GalleryImageVersion),
        (r"/virtualMachines/[^/]+$", models.VirtualMachine),
        (r"/galleries/[^/]+/images/[^/]+$", models.GalleryImage),
        (r"/proximityPlacementGroups/[^/]+$", models.ProximityPlacementGroup),
    ]


def _exercise(fake) -> None:
    env = CloudEnv("azure", fake)
    provider = env.provider()
    image = env.seed_candidate()
    for region in env.resolved.stack.clouds.azure.regions:
        provider.replicate(image, region, token=f"imagectl-{region}")
    for region in env.resolved.stack.clouds.azure.regions:
        while provider.replica_status(image, region).state == "pending":
            pass
        provider.set_pointer("h100-training", region, image.image_id)
    provider.deprecate(image)
    inst = launch(
        provider, image, SIZE, env.locations()[0], launched_by="contract",
        ssh_public_key="ssh-ed25519 AAAA contract", allowed_cidr="203.0.113.0/24",
    )  # fmt: skip
    provider.wait_reachable(inst, timeout_s=30)
    provider.list_instances(managed_only=False)
    provider.terminate(inst)
    # a multi-node run's placement, with a VM in it, and the reaper's listing (paged)
    placements = [
        placement(provider, image, SIZE, env.locations()[0], name=f"imagectl-contract-{n}",
                  ttl=dt.timedelta(hours=-1), launched_by="contract")
        for n in range(3)
    ]  # fmt: skip
    placed = launch(provider, image, SIZE, env.locations()[0], launched_by="contract",
                    placement=placements[0])  # fmt: skip
    assert len(provider.list_placements()) == 3
    provider.terminate(placed)
    provider.delete_placement(placements[0])
    # the build's gallery image definition, and a Trusted Launch VM in a reservation group
    build = env.resolved.stack.clouds.azure.build
    group = fake.add_capacity_reservation(
        build.resource_group, "crg", location=build.location,
        size=SIZE, count=1, zone="1",
    )  # fmt: skip
    special = env.provider_with({
        "gallery.security_type": "TrustedLaunch",
        "gallery.image_definition": "h100-training-tl",  # a new one
        "validation_capacity": {"reservation_group": group, "zone": "1"},
    })  # fmt: skip
    special.prepare_build()
    inst = launch(special, image, SIZE, f"{build.location}/1", launched_by="contract")
    special.terminate(inst)


def test_compute_requests_and_responses_follow_the_arm_models(azure_fake) -> None:
    _exercise(azure_fake)
    models = _models()
    requests = _request_models()
    found: list[str] = []
    checked = 0
    for logged in azure_fake.requests:
        if logged.status >= 400:
            continue
        for direction, body in (("request", logged.body), ("response", logged.response)):
            items = body.get("value", [body]) if isinstance(body, dict) else []
            for item in items:
                model = models.get(str(item.get("type", "")).lower())
                if model is None and direction == "request":
                    model = next((m for pat, m in requests if re.search(pat, logged.path)), None)
                if model is not None:
                    found += problems(item, model, direction=direction)
                    checked += 1
    assert not found, "\n".join(sorted(set(found)))
    assert checked > 10


def test_the_checker_catches_foreign_and_read_only_fields() -> None:
    from azure.mgmt.compute import models

    version = {"properties": {"provisioningState": "Succeeded", "publishingProfile": {}}}
    assert problems(version, models.GalleryImageVersion, direction="request") == [
        "GalleryImageVersion.properties > GalleryImageVersionProperties.provisioningState: "
        "read-only, sent in a request"
    ]
    assert problems({"propertiez": {}}, models.GalleryImageVersion, direction="response") == [
        "GalleryImageVersion.propertiez: not a field of GalleryImageVersion"
    ]
