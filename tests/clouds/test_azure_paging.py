"""ARM lists page: each response carries ``value`` and, until the last page, an absolute
``nextLink`` (Azure REST API guidelines, "Collections / paged results"; azure-core's
ItemPaged follows it). The fake pages every collection two items at a time, so a
listing that read only the first page would miss images and fleet VMs here."""

from __future__ import annotations

from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]


def test_gallery_versions_beyond_the_first_page_are_found(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    seeded = [env.seed_candidate().image_id.lower() for _ in range(5)]
    found = [i.image_id.lower() for i in env.provider().find_images(stack="h100-training")]
    assert sorted(found) == sorted(seeded)
    pages = azure_fake.calls("GET", "/versions$")
    assert any(r.query.get("$skiptoken") for r in pages), "the listing never paged"


def test_fleet_vms_beyond_the_first_page_are_listed(azure_fake) -> None:
    env = CloudEnv("azure", azure_fake)
    image = env.seed_candidate()
    provider = env.provider()
    location = env.locations()[0]
    launched = {
        launch(provider, image, "Standard_ND96isr_H100_v5", location).instance_id for _ in range(5)
    }
    assert set(env.live_instances()) == launched
    assert any(r.query.get("$skiptoken") for r in azure_fake.calls("GET", "/virtualMachines$"))
