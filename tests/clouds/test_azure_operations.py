"""Azure's long-running operations are polled where Azure answers them, and a poll is a
call ARM authorizes like any other.

Sources: "Azure resource provider operations", Microsoft.Compute
(``locations/capsOperations/read``: "Gets the status of an asynchronous Caps operation";
``locations/diskOperations/read``; ``locations/operations/read``) and Microsoft.Network
(``locations/operations/read``); the built-in role "Compute Gallery Artifacts Publisher",
which grants ``Microsoft.Compute/locations/capsOperations/read`` beside its gallery writes;
Azure REST API guidelines, "Long-running operations" (``Azure-AsyncOperation`` /
``Location``, polled by the client).
"""

from __future__ import annotations

from typing import Any

import pytest

from imagectl.clouds.azure.clients import AzureClients
from tests.fakes import permissions as perm
from tests.fakes.azure_arm import FakeAzureArm

SUB = "00000000-0000-0000-0000-000000000000"
RG = "imagectl-images"


@pytest.fixture
def arm() -> Any:
    with FakeAzureArm(SUB, op_polls=2) as fake:
        yield fake


def _clients(arm: FakeAzureArm) -> AzureClients:
    return AzureClients(subscription_id=SUB, endpoint=arm.endpoint, polling_interval=0,
                        retry_total=0)  # fmt: skip


def _definition(clients: AzureClients) -> Any:
    from azure.mgmt.compute import models as m

    return clients.compute.gallery_images.begin_create_or_update(
        RG, "imagectl_gallery", "h100-training",
        m.GalleryImage(location="westus3", os_type="Linux", hyper_v_generation="V2",
                       identifier=m.GalleryImageIdentifier(publisher="p", offer="o", sku="s")),
    )  # fmt: skip


def _disk(clients: AzureClients) -> Any:
    from azure.mgmt.compute import models as m

    clients.compute.disks.begin_create_or_update(
        RG, "build-osdisk", m.Disk(location="westus3", creation_data=m.CreationData(
            create_option="Empty"), disk_size_gb=30),
    ).result()  # fmt: skip
    return clients.compute.disks.begin_delete(RG, "build-osdisk")


def _polled(arm: FakeAzureArm) -> list[str]:
    return [c.path for c in arm.calls("GET") if "/locations/" in c.path]


def test_gallery_writes_are_polled_at_caps_operations_in_their_location(arm: Any) -> None:
    arm.add_gallery(RG, "imagectl_gallery", location="westus3")
    _definition(_clients(arm)).result()
    polled = _polled(arm)
    assert polled and all(
        p.startswith(f"/subscriptions/{SUB}/providers/Microsoft.Compute/locations/westus3/"
                     "capsOperations/") for p in polled), polled  # fmt: skip


def test_disk_operations_are_polled_at_disk_operations(arm: Any) -> None:
    _disk(_clients(arm)).result()
    polled = _polled(arm)
    assert polled and all("/providers/Microsoft.Compute/locations/westus3/diskOperations/" in p
                          for p in polled), polled  # fmt: skip


def test_an_operation_is_not_answered_at_another_kinds_url(arm: Any) -> None:
    """A client that polled the generic URL for a gallery write would get 404, as in Azure."""
    import requests

    arm.add_gallery(RG, "imagectl_gallery", location="westus3")
    poller = _definition(_clients(arm))
    path = next(iter(arm.operations.values()))["path"]  # the announced URL
    assert "/capsOperations/" in path
    wrong = arm.endpoint + path.replace("/capsOperations/", "/operations/")
    assert requests.get(wrong + "?api-version=2024-03-02", timeout=10).status_code == 404
    poller.result()


@pytest.mark.parametrize(
    ("action", "start"),
    [
        ("Microsoft.Compute/locations/capsOperations/read", "gallery"),
        ("Microsoft.Compute/locations/diskOperations/read", "disk"),
    ],
)
def test_a_poll_without_its_read_permission_is_refused_naming_it(
    arm: Any, action: str, start: str
) -> None:
    from azure.core.exceptions import HttpResponseError

    arm.add_gallery(RG, "imagectl_gallery", location="westus3")
    clients = _clients(arm)
    role = [
        "Microsoft.Compute/galleries/images/write", "Microsoft.Compute/galleries/images/read",
        "Microsoft.Compute/disks/write", "Microsoft.Compute/disks/read",
        "Microsoft.Compute/disks/delete", "Microsoft.Compute/locations/*/read",
    ]  # fmt: skip
    enforcer = perm.enforce_arm(arm, role, not_actions=[action])
    with pytest.raises(HttpResponseError) as refused:
        (_disk(clients) if start == "disk" else _definition(clients)).result()
    assert enforcer.refused == [action]
    assert refused.value.status_code == 403
    assert action in str(refused.value)
    arm.authorize = None
    perm.enforce_arm(arm, role)  # with it, the same operation completes
    (_disk(clients) if start == "disk" else _definition(clients)).result()
