"""The permission documents are derived from the code: every SDK call site the source holds
(found by ``call_inventory.scan``, whatever path reaches it) is in the inventory
(``images/permissions/calls/<cloud>.yaml``) with the permissions its service's
authorization reference names, and each role's document grants exactly what the calls its
commands reach need: removing any one grant fails, naming the call and the document; a
grant no call needs fails too.

The runs on the emulators (``tests/promotion/test_promotion_permissions.py``,
``tests/clouds/test_validate_reap_permissions.py``, ``tests/clouds/test_build_permissions.py``)
prove the paths a test makes; this holds the paths only a failure, a retry or an option
reaches, which no happy run makes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.contract import call_inventory as inv
from tests.fakes import permissions as perm


def _documents(cloud: str) -> dict[str, Any]:
    _, data = inv.inventory(cloud)
    return {role: perm.load_document(cloud, role) for role in data["roles_checked"]}


@pytest.mark.parametrize("cloud", inv.CLOUDS)
def test_every_sdk_call_site_in_the_code_is_in_the_inventory(cloud: str) -> None:
    entries, data = inv.inventory(cloud)
    found = {(s.at, s.call) for s in inv.scan(cloud, data.get("aliases") or {})}
    listed = {(e.at, e.scan) for e in entries}
    assert not found - listed, (
        f"SDK calls not in images/permissions/calls/{cloud}.yaml (add each with its "
        f"permissions, source and roles): {sorted(found - listed)}"
    )
    assert not listed - found, f"inventory sites the code no longer has: {sorted(listed - found)}"


@pytest.mark.parametrize("cloud", inv.CLOUDS)
def test_each_role_document_grants_exactly_what_its_calls_need(cloud: str) -> None:
    assert inv.problems(cloud) == []


def _grants() -> list[tuple[str, str, str]]:
    out = []
    for cloud in inv.CLOUDS:
        for role, doc in _documents(cloud).items():
            out += [(cloud, role, p) for p in perm.granted(cloud, doc)]
    return out


@pytest.mark.parametrize(("cloud", "role", "permission"), _grants())
def test_removing_one_permission_fails_naming_the_call_and_the_document(
    cloud: str, role: str, permission: str
) -> None:
    docs = _documents(cloud)
    docs[role] = perm.without(cloud, docs[role], permission)
    found = inv.problems(cloud, docs)
    document = str(perm.document_path(cloud, role).relative_to(inv.ROOT))
    naming = [p for p in found if p.startswith(f"{document} does not grant {permission},")]
    assert naming, found
    assert all(" needs" in p and (" at " in p or "Packer" in p) for p in naming)


def test_calls_only_a_failure_a_retry_or_an_option_reaches_are_counted() -> None:
    """The paths no happy run makes are in the inventory (and so in the documents)."""
    counts: Counter[str] = Counter()
    for cloud in inv.CLOUDS:
        entries, _ = inv.inventory(cloud)
        counts.update(f"{cloud}:{e.path}" for e in entries)
    for cloud in inv.CLOUDS:
        assert counts[f"{cloud}:failure"] + counts[f"{cloud}:option"] >= 1, counts
    print(dict(sorted(counts.items())))


def test_the_scan_finds_calls_by_the_sdks_own_method_names() -> None:
    """The scan is not a list typed here: it finds the calls the SDK models name."""
    sites = {(s.at, s.call) for s in inv.scan("aws")}
    assert ("pipeline/clouds/aws/promotion.py:AwsPromotion.delete", "deregister_image") in sites
    assert ("pipeline/clouds/aws/provider.py:AwsProvider.describe_images",
            "describe_images") in sites  # get_paginator("describe_images")  # fmt: skip
    gcp = {(s.at, s.call) for s in inv.scan("gcp", {"ops": "operations"})}
    assert ("pipeline/clouds/gcp/promotion.py:GcpPromotion.delete", "images.delete") in gcp
    az = {(s.at, s.call) for s in inv.scan("azure", {"versions": "gallery_image_versions"})}
    assert ("pipeline/clouds/azure/promotion.py:AzurePromotion.delete",
            "gallery_image_versions.begin_delete") in az  # fmt: skip
