"""The compute client sets up the gallery models before any thread reads one.

azure-mgmt-compute's generated models build a class's field table the first time an
object of that class is made; two threads doing it at once can break one of them, and
the SDK then keeps the raw JSON instead of the model (Azure/azure-sdk-for-python#47426).
A promotion reads gallery image versions from one thread per region: the CI run of
31326f5 saw ``raw.replication_status`` come back as a ``dict`` in one region thread
("'dict' object has no attribute 'summary'"). Each case runs in a fresh interpreter:
the SDK's set-up is per process, and this worker's other tests may have done it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("azure.mgmt.compute")

PROBE = r"""
import json, sys
from azure.mgmt.compute import models
from azure.mgmt.compute._utils.model_base import Model

def ready(cls):
    return f"{cls.__module__}.{cls.__qualname__}" in Model._calculated

if sys.argv[1] == "client":
    from imagectl.clouds.azure.clients import AzureClients
    AzureClients(subscription_id="00000000-0000-0000-0000-000000000000",
                 endpoint="http://127.0.0.1:9").compute
names = ["GalleryImageVersion", "GalleryImageVersionProperties", "ReplicationStatus",
         "RegionalReplicationStatus", "GalleryImageVersionPublishingProfile", "TargetRegion",
         "GalleryImage", "Gallery"]
print(json.dumps({n: ready(getattr(models, n)) for n in names}))
"""


def _probe(mode: str) -> dict[str, bool]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_the_client_sets_up_every_gallery_model_a_region_thread_reads() -> None:
    ready = _probe("client")
    assert all(ready.values()), {n: r for n, r in ready.items() if not r}


def test_without_the_client_the_sdk_sets_them_up_lazily() -> None:
    """The probe can tell: an untouched process has set up none of them."""
    ready = _probe("bare")
    assert not any(ready.values()), ready


def test_threads_share_one_compute_client() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from imagectl.clouds.azure.clients import AzureClients

    clients = AzureClients(
        subscription_id="00000000-0000-0000-0000-000000000000", endpoint="http://127.0.0.1:9"
    )
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: clients.compute, range(8)))
    assert all(c is got[0] for c in got)
