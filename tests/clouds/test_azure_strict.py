"""Azure promotion against the ARM fake made as strict as the Compute Gallery: a version
stays ``Updating`` while any region replicates and refuses a second write meanwhile
(409 OperationNotAllowed); target regions come back as display names ("West US 3")."""

from __future__ import annotations

from tests.fakes.fixtures import CloudEnv

pytest_plugins = ["tests.fakes.fixtures"]


def _version(fake, image_id: str) -> dict:
    return fake.resources[image_id.lower()]


def test_target_regions_go_in_one_write_per_version_state(azure_fake) -> None:
    """Every region of the stack is added while the version is writable, in one write
    with the stack's replica count and storage type, and nothing is refused with 409:
    before, each region sent its own update while the first one was still replicating."""
    env = CloudEnv("azure", azure_fake)
    provider = env.provider()
    provider.replica_count, provider.storage_account_type = 2, "Standard_ZRS"
    image = env.seed_candidate()
    regions = list(env.resolved.stack.clouds.azure.regions)
    for region in regions:
        provider.replicate(image, region, token=f"imagectl-{region}")
    for region in regions:
        while provider.replica_status(image, region).state == "pending":
            pass
        assert provider.replica_status(image, region).state == "available"
    assert [r.status for r in azure_fake.requests if r.status == 409] == []
    targets = _version(azure_fake, image.image_id)["properties"]["publishingProfile"][
        "targetRegions"
    ]
    assert sorted(t["name"] for t in targets) == ["East US", "South Central US", "West US 3"]
    added = [t for t in targets if t["name"] != "East US"]
    assert {(t["regionalReplicaCount"], t["storageAccountType"]) for t in added} == {
        (2, "Standard_ZRS")
    }


def test_writes_wait_for_updating_to_end(azure_fake) -> None:
    """Tags, ``exclude_from_latest`` and target regions are written one at a time, each
    after the version left ``Updating``."""
    env = CloudEnv("azure", azure_fake)
    provider = env.provider()
    image = env.seed_candidate()
    provider.replicate(image, "westus3", token="imagectl-w")  # replication starts
    provider.tag_state(image, "promoting")  # must wait, not be refused
    provider.set_pointer("h100-training", "westus3", image.image_id)
    body = _version(azure_fake, image.image_id)
    assert body["tags"]["imagectl:state"] == "promoting"
    assert body["properties"]["publishingProfile"]["excludeFromLatest"] is False
    assert not [r for r in azure_fake.requests if r.status == 409]


def test_pointer_knows_a_version_being_replicated(azure_fake) -> None:
    """The promoted version replicating into a new region is ``Updating``; ``latest`` in
    its regions still resolves to it (before, only ``Succeeded`` versions counted)."""
    env = CloudEnv("azure", azure_fake)
    provider = env.provider()
    image = env.seed_candidate()
    provider.set_pointer("h100-training", "eastus", image.image_id)
    assert provider.get_pointer("h100-training", "eastus") == image.image_id
    azure_fake.replication_polls = 50
    provider.replicate(image, "westus3", token="imagectl-x")
    assert provider.replica_status(image, "westus3").state == "pending"
    assert provider.get_pointer("h100-training", "eastus") == image.image_id


def test_fleet_listing_covers_the_subscription_and_resolves_definition_ids(azure_fake) -> None:
    """Fleet VMs live in any resource group, and a VM made from the image definition id
    (the gallery's latest) keeps that id: its version is ARM's ``exactVersion``. Before,
    only the build resource group was listed and such a VM reported the definition."""
    import json
    import urllib.request

    env = CloudEnv("azure", azure_fake)
    image = env.seed_candidate()
    provider = env.provider()
    provider.set_pointer("h100-training", "eastus", image.image_id)
    definition = image.image_id.rsplit("/versions/", 1)[0]
    vm = (
        f"{azure_fake.endpoint}/subscriptions/{azure_fake.subscription}/resourceGroups/"
        "ml-fleet/providers/Microsoft.Compute/virtualMachines/node-7?api-version=2024-07-01"
    )
    body = {
        "location": "eastus",
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_ND96isr_H100_v5"},
            "storageProfile": {"imageReference": {"id": definition}},
        },
    }
    request = urllib.request.Request(
        vm,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request).read()
    fleet = {i.instance_id: i for i in provider.list_instances(managed_only=False)}
    assert fleet["node-7"].image_id.lower() == image.image_id.lower()


def test_direct_sharing_needs_a_groups_gallery_with_only_validated_versions(azure_fake) -> None:
    """Direct shared gallery (preview, Microsoft Learn share-gallery-direct): only a gallery
    created with sharingProfile.permissions Groups can be shared with subscriptions or
    tenants, and the share covers the whole gallery. imagectl says what to do for the
    first, and refuses to share a gallery that holds an unvalidated candidate; the fake
    refuses the share itself on a gallery that is not Groups."""
    import pytest
    from azure.core.exceptions import HttpResponseError

    from imagectl.core.errors import CloudError
    from imagectl.stacks.schema import Sharing

    env = CloudEnv("azure", azure_fake)
    g = env.resolved.stack.clouds.azure.gallery
    provider = env.provider()
    image = env.seed_candidate(tags={"imagectl:state": "promoting"})
    sharing = Sharing(principals=["11111111-2222-3333-4444-555555555555"])
    with pytest.raises(CloudError) as refused:
        provider.share(image, sharing)
    text = refused.value.render()
    assert "sharingProfile.permissions" in text and "--permissions groups" in text
    assert "directsharedgallery-preview" in text
    with pytest.raises(HttpResponseError, match="OperationNotAllowed"):
        provider.clients.compute.gallery_sharing_profile.begin_update(
            g.resource_group,
            g.name,
            {"operationType": "Add", "groups": [{"type": "Subscriptions", "ids": ["x"]}]},
        ).result()
    assert not azure_fake.sharing

    azure_fake.set_gallery_permissions(g.resource_group, g.name, "Groups")
    unvalidated = env.seed_candidate(tags={"imagectl:state": "built"})
    with pytest.raises(CloudError) as exposed:
        provider.share(image, sharing)
    version = unvalidated.image_id.rsplit("/", 1)[-1]
    assert f"{g.image_definition}/{version} (built)" in exposed.value.render()
    assert not azure_fake.sharing

    provider.delete(unvalidated)
    provider.share(image, sharing)
    (groups,) = azure_fake.sharing.values()
    assert groups == [{"type": "Subscriptions", "ids": ["11111111-2222-3333-4444-555555555555"]}]
