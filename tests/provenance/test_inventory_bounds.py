"""What an image reports is bounded before anything is recorded.

The inventory and manifest a build fetches back from the image are a compromised image's
to write: a 200,000-deep inventory was a RecursionError traceback after the image was
recorded ``built``. Each limit (size, depth, count, string length, a package named
twice) is one paragraph naming the file, exit 2; through the build stage's own finish,
nothing is recorded but the failed build.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from imagectl.building import records as build_records
from imagectl.building.stage import _finish
from imagectl.catalog.db import open_catalog
from imagectl.catalog.models import Build, Image, Sbom
from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import UserError
from imagectl.packer.manifest import Artifact
from imagectl.provenance.inventory import MAX_PACKAGES, load_inventory
from imagectl.provenance.record import prepare_build_sbom
from imagectl.stacks import load_resolved
from imagectl.stacks.expectations import for_build
from tests.support import REPO

PACKAGE = {"name": "p", "version": "1", "source": "p", "source_version": "1", "arch": "amd64"}


def _inventory(**over: object) -> dict:
    return {"schema_version": 1, "kernel": "6.1.0-28-cloud-amd64", "dpkg": [PACKAGE],
            "python": [], "kernel_modules": [], **over}  # fmt: skip


HOSTILE: dict[str, tuple[bytes, str]] = {
    "200,000 deep": (b"[" * 200_000 + b"]" * 200_000, "nested 200000 levels deep"),
    "deep inside a field": (
        json.dumps(_inventory()).replace('"python": []', '"python": ' + "[" * 50 + "]" * 50)
        .encode(), "nested 51 levels deep",
    ),
    "33 MiB": (b'{"kernel": "' + b"x" * (33 * 1024 * 1024) + b'"}', "larger than 32 MiB"),
    "too many packages": (
        json.dumps(_inventory(dpkg=[{**PACKAGE, "name": f"p{i}"} for i in range(MAX_PACKAGES + 1)]))
        .encode(), "dpkg: List should have at most 100000 items",
    ),
    "a 2,000-character version": (
        json.dumps(_inventory(dpkg=[{**PACKAGE, "version": "1" * 2000}])).encode(),
        "dpkg.0.version: String should have at most 1024 characters",
    ),
    "a package twice": (
        json.dumps(_inventory(dpkg=[PACKAGE, PACKAGE])).encode(), "'p:amd64' is listed twice",
    ),
    "a 5,000-digit number": (b'{"schema_version": ' + b"9" * 5000 + b"}", "5000 digits long"),
    "not UTF-8": (b'{"kernel": "caf\xe9"}', "not UTF-8"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_inventory_is_one_clear_error(case: str, tmp_path: Path) -> None:
    data, expected = HOSTILE[case]
    path = tmp_path / "inventory.json"
    path.write_bytes(data)
    with pytest.raises(UserError) as err:
        load_inventory(path)
    message = err.value.render()
    assert expected in message and str(path) in message, message


def test_a_hostile_manifest_is_one_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "build"
    (folder / "image").mkdir(parents=True)
    (folder / "image" / "inventory.json").write_text(json.dumps(_inventory()))
    manifest = folder / "image" / "manifest.json"
    _, resolved = load_resolved(REPO / "images", "local")
    for data, expected in (
        (b'{"held": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested 100001 levels deep"),
        (json.dumps({"held": [["nested"]]}).encode(), "at most 100000 package names"),
    ):
        manifest.write_bytes(data)
        with pytest.raises(UserError, match=expected) as err:
            prepare_build_sbom("b-1", folder, resolved, "local")
        assert str(manifest) in err.value.render()


def test_a_deep_inventory_is_refused_before_the_build_records_an_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(tmp_path / "registry"))
    _, resolved = load_resolved(REPO / "images", "local")
    spec = cloud_spec("local")
    folder = tmp_path / "build"
    (folder / "image").mkdir(parents=True)
    (folder / "image" / "inventory.json").write_bytes(HOSTILE["200,000 deep"][0])
    build_id = "20261122-042530-ab12cd"
    expectations = for_build(REPO / "images", resolved, ["qemu-tcg"], build_id=build_id)
    record = build_records.start(resolved, spec, build_id, "0" * 40, expectations)
    artifact = Artifact(cloud="local", builder_type="qemu", id="sha256:" + "a" * 64,
                        location="local-a")  # fmt: skip
    try:
        with pytest.raises(UserError, match="nested 200000 levels deep"):
            _finish(record, resolved, spec, [artifact], folder, None)
    finally:
        record.catalog.close()
    catalog = open_catalog(db_url)
    try:
        with catalog.transaction() as s:
            assert s.scalars(select(Image)).all() == []
            assert s.scalars(select(Sbom)).all() == []
            (build,) = s.scalars(select(Build)).all()
            assert build.outcome == "failed"
    finally:
        catalog.close()
