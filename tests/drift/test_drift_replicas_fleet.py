"""Replica and fleet drift through the real catalog, promotion and local provider.

An image of the ``local`` stack is built (a disk file imported into the registry's
``build`` region), validated and promoted with ``imagectl.promotion.promote`` to the
stack's regions (local-a/b/c); then the world drifts: a replica disappears, a copy fails,
a region's pointer is moved by hand, instances keep running an older image.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from drift_helpers import stack_report

from tests.support import make_receipt

REPO = Path(__file__).resolve().parents[2]
REGIONS = ["local-a", "local-b", "local-c"]


@dataclass
class World:
    tmp: Path
    catalog: Any
    registry: Path
    stack: Any

    def provider(self, **options: Any) -> Any:
        from imagectl.clouds.local.provider import LocalProvider
        from imagectl.clouds.local.spec import LocalOptions

        return LocalProvider(LocalOptions(root=self.registry, **options))

    def promoted(self, **provider_options: Any) -> Any:
        """A new image of the local stack, validated and promoted to every region."""
        from imagectl.catalog import repository as repo
        from imagectl.promotion import promote
        from imagectl.provenance.attest import attest_image

        disk = self.tmp / f"disk-{uuid.uuid4().hex[:8]}.qcow2"
        disk.write_bytes(os.urandom(4096))
        image = self.provider().import_image(
            disk, region="build", stack="local", digest=self.stack.digest
        )
        receipt = make_receipt(image.image_id, "local", self.stack.digest)
        with self.catalog.transaction() as s:
            build = repo.record_build(s, build_id=f"b-{uuid.uuid4().hex[:8]}", stack="local",
                                      stack_digest=self.stack.digest, cloud="local")  # fmt: skip
            row = repo.record_image(s, build=build, cloud_image_id=image.image_id,
                                    region="build")  # fmt: skip
            repo.set_state(s, row, "validating", reason="test")
            repo.record_receipt(s, row, shape="qemu-tcg", host="vm-1", receipt=receipt)
            repo.set_state(s, row, "validated", reason="test")
            pk = row.id
        attest_image(self.catalog, pk)  # signed as the validation stage signs
        promote(self.catalog, self.provider(**provider_options), self.stack, pk,
                poll_s=0.01, retention=False)  # fmt: skip
        return image


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from imagectl.catalog.db import open_catalog
    from imagectl.stacks import load_resolved

    db_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    registry = tmp_path / "registry"
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(registry))
    catalog = open_catalog(db_url)
    _loaded, resolved = load_resolved(REPO / "images", "local")
    try:
        yield World(tmp_path, catalog, registry, resolved)
    finally:
        catalog.close()


def drift(cli, *sources: str):  # type: ignore[no-untyped-def]
    return cli("--root", str(REPO), "drift", "--stack", "local", *sources, "--format", "json")


def findings(result, kind: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [f for f in stack_report(result, "local")["findings"] if f["kind"] == kind]


def test_fully_replicated_image_is_no_drift(cli, world):
    world.promoted()
    result = drift(cli, "--replicas")
    assert result.code == 0, result.out + result.err
    assert stack_report(result, "local")["findings"] == []


def test_region_missing_the_image(cli, world, workspace_copy):
    image = world.promoted()
    # the stack gained a target region after the image was promoted
    path = workspace_copy / "images" / "stacks" / "local.yaml"
    path.write_text(path.read_text().replace("local-c]", "local-c, local-d]"))
    result = cli(
        "--root", str(workspace_copy), "drift", "--stack", "local", "--replicas", "--format", "json"
    )
    assert result.code == 1
    (missing,) = findings(result, "replica-missing")
    assert (missing["region"], missing["subject"]) == ("local-d", image.image_id)
    (odd,) = findings(result, "pointer-disagrees")  # and local-d has no latest pointer
    assert (odd["region"], odd["available"]) == ("local-d", "(no pointer)")


def test_region_whose_copy_failed(cli, world):
    world.promoted(fail={"local-c": "replica"})
    result = drift(cli, "--replicas")
    assert result.code == 1
    assert [f["region"] for f in findings(result, "replica-failed")] == ["local-c"]


def test_pointer_that_disagrees_with_the_other_regions(cli, world):
    old = world.promoted()
    new = world.promoted()
    world.provider().set_pointer("local", "local-a", old.image_id)  # moved back by hand
    result = drift(cli, "--replicas")
    assert result.code == 1
    (odd,) = findings(result, "pointer-disagrees")
    assert odd["region"] == "local-a"
    assert (odd["current"], odd["available"]) == (new.image_id, old.image_id)


def test_fleet_counts_instances_not_on_the_current_image(cli, world):
    from imagectl.clouds.base import CloudImage
    from imagectl.tags import TAG_STACK

    old = world.promoted()
    new = world.promoted()
    provider = world.provider()
    for region, image, n in [("local-a", new, 2), ("local-a", old, 3), ("local-b", new, 1)]:
        for _ in range(n):
            provider.register_instance(CloudImage("local", region, image.image_id),
                                       tags={TAG_STACK: "local"})  # fmt: skip
    provider.register_instance(CloudImage("local", "local-a", old.image_id),
                               tags={TAG_STACK: "other-stack"})  # fmt: skip
    result = drift(cli, "--fleet")
    assert result.code == 1
    summary = {f["region"]: f for f in findings(result, "fleet-summary")}
    assert summary["local-a"]["extra"]["images"] == {new.image_id: 2, old.image_id: 3}
    assert summary["local-b"]["extra"]["total"] == 1
    (stale,) = findings(result, "fleet-stale")
    assert stale["region"] == "local-a" and stale["extra"]["stale"] == 3
    assert stale["current"] == new.image_id and stale["available"] == old.image_id


def test_fleet_all_current_is_no_drift(cli, world):
    from imagectl.clouds.base import CloudImage
    from imagectl.tags import TAG_STACK

    image = world.promoted()
    world.provider().register_instance(CloudImage("local", "local-c", image.image_id),
                                       tags={TAG_STACK: "local"})  # fmt: skip
    result = drift(cli, "--fleet")
    assert result.code == 0, result.out
    assert len(findings(result, "fleet-summary")) == 1


def test_json_flag_like_every_read_command(cli, world):
    """``--json`` is the same report as ``--format json`` (every read command takes it)."""
    world.promoted()
    flag = cli("--root", str(REPO), "drift", "--stack", "local", "--replicas", "--json")
    assert flag.code == 0, flag.out + flag.err
    assert stack_report(flag, "local") == stack_report(drift(cli, "--replicas"), "local")
