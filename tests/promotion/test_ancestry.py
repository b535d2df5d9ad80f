"""Known ancestry: two builds with the same stack digest on different
base images are told apart by ``imagectl diff`` and by their attestations.

Both builds carry the same inventory (the same packages at the same versions): only
the base image they started from differs, as when a publisher releases a new AMI under
the stack's name filter between two builds. The base image is recorded on the build
(``builds.base_image_id``, migration 0006), which the SBOM (the image's pedigree
ancestor), the diff and the signed statement read.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.models import Build, Image
from imagectl.clouds.base_image import BaseImage
from imagectl.provenance.attest import attest_image
from imagectl.provenance.record import record_build_sbom

INVENTORY = {
    "schema_version": 1,
    "kernel": "6.1.0-28-cloud-amd64",
    "os": {"id": "debian", "version_id": "12", "version_codename": "bookworm"},
    "dpkg": [
        {
            "name": "libssl3",
            "version": "3.0.15-1~deb12u1",
            "source": "openssl",
            "source_version": "3.0.15-1~deb12u1",
            "arch": "amd64",
        }
    ],
    "python": [{"name": "PyYAML", "version": "6.0.2"}],
    "kernel_modules": [],
}
OLD = BaseImage(cloud="local", id="ami-0aaaaaaaaaaaaaaa1", name="ubuntu-jammy-20261001",
                created_at=dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc))  # fmt: skip
NEW = BaseImage(cloud="local", id="ami-0bbbbbbbbbbbbbbb2", name="ubuntu-jammy-20261101",
                created_at=dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc))  # fmt: skip


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


def _built_on(world: Any, tmp_path: Path, base: BaseImage, name: str) -> Any:
    """A validated image whose build started from ``base``, with its SBOM, attested."""
    image = world.validated(attest=False)
    with world.catalog.transaction() as s:
        build = s.get(Build, image.build_pk)
        build.base_image_id, build.base_image = base.id, base.to_dict()
    folder = tmp_path / name
    (folder / "image").mkdir(parents=True)
    (folder / "image" / "inventory.json").write_text(json.dumps(INVENTORY))
    (folder / "image" / "manifest.json").write_text(json.dumps({"held": ["libssl3"]}))
    assert record_build_sbom(world.catalog, image.build_pk, name, folder, world.stack, "local")
    attest_image(world.catalog, image.id)
    return image


def _statement(world: Any, image: Any) -> dict[str, Any]:
    with world.catalog.transaction() as s:
        row = repo.latest_attestation(s, s.get(Image, image.id))
        envelope = dict(row.envelope)
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def test_same_digest_different_base_told_apart_by_diff_and_attestation(env, cli, tmp_path) -> None:
    first = _built_on(env, tmp_path, OLD, "first")
    second = _built_on(env, tmp_path, NEW, "second")
    assert first.stack_digest == second.stack_digest  # the same pins

    r = cli("diff", str(first.id), str(second.id), "--json")
    assert r.code == 0, r.err
    assert r.json()["changes"] == [
        {"section": "base", "kind": "changed", "name": NEW.name, "old": OLD.id, "new": NEW.id}
    ]
    text = cli("diff", str(first.id), str(second.id))
    assert f"~ {NEW.name} {OLD.id} -> {NEW.id}" in text.out and "Base image:" in text.out

    a, b = _statement(env, first), _statement(env, second)
    assert a["predicate"]["image"]["stack_digest"] == b["predicate"]["image"]["stack_digest"]
    assert a["predicate"]["image"]["base_image"]["id"] == OLD.id
    assert b["predicate"]["image"]["base_image"]["id"] == NEW.id
    assert a["predicate"]["image"]["base_image"]["created_at"] == OLD.created_at.isoformat()

    # the SBOM names the base as the image's ancestor
    with env.catalog.transaction() as s:
        doc = dict(repo.sbom_of(s, first.id).document)
    (ancestor,) = doc["metadata"]["component"]["pedigree"]["ancestors"]
    assert (ancestor["name"], ancestor["version"]) == (OLD.name, OLD.id)


def test_the_same_base_is_no_change(env, cli, tmp_path) -> None:
    first = _built_on(env, tmp_path, OLD, "a")
    second = _built_on(env, tmp_path, OLD, "b")
    r = cli("diff", str(first.id), str(second.id), "--json")
    assert r.code == 0 and r.json()["changes"] == []


def test_a_build_recorded_with_its_base_keeps_the_id(env) -> None:
    with env.catalog.transaction() as s:
        build = repo.record_build(
            s, build_id="b-ancestry", stack="local", stack_digest=env.stack.digest,
            cloud="local", base_image=NEW.to_dict(),
        )  # fmt: skip
        build_pk = build.id
    with env.catalog.transaction() as s:
        row = s.get(Build, build_pk)
        assert row.base_image_id == NEW.id
        assert BaseImage.from_dict(dict(row.base_image)) == NEW
