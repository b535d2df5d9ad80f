"""``imagectl diff``: two images' SBOMs in the catalog, compared pins first.

Each image's build gets its SBOM through the production path (``record_build_sbom``
reading ``<build folder>/image/inventory.json`` and ``manifest.json`` as the manifest
role fetches them). The first inventory is this machine's real dpkg database (the role's
script); the second is the same with one held package at another version, as a stack
that changes one pin builds it. The diff must show exactly that one change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.provenance.record import record_build_sbom
from tests.support import require_tool

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "playbooks" / "roles" / "manifest" / "files" / "write-inventory.py"


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


@pytest.fixture(scope="module")
def real_inventory() -> dict:
    require_tool("dpkg-query")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--kernel", "6.1.0-28-cloud-amd64"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return json.loads(out)


def _with_sbom(world, tmp_path: Path, inventory: dict, held: list[str], name: str):
    image = world.validated()
    folder = tmp_path / name
    (folder / "image").mkdir(parents=True)
    (folder / "image" / "inventory.json").write_text(json.dumps(inventory))
    (folder / "image" / "manifest.json").write_text(json.dumps({"held": held}))
    path = record_build_sbom(
        world.catalog, image.build_pk, f"b-{name}", folder, world.stack, "local"
    )
    assert path == folder / "sbom.cdx.json" and path.is_file()
    return image


def test_one_changed_pin_is_exactly_the_diff(env, cli, tmp_path, real_inventory) -> None:
    pinned = real_inventory["dpkg"][0]["name"]
    held = [pinned, real_inventory["dpkg"][1]["name"]]
    newer = json.loads(json.dumps(real_inventory))
    old_version = newer["dpkg"][0]["version"]
    newer["dpkg"][0]["version"] = old_version + "+imagectl1"
    first = _with_sbom(env, tmp_path, real_inventory, held, "first")
    second = _with_sbom(env, tmp_path, newer, held, "second")

    r = cli("diff", str(first.id), str(second.id), "--json")
    assert r.code == 0, r.err
    assert r.json()["changes"] == [
        {"section": "pinned", "kind": "changed", "name": pinned, "old": old_version,
         "new": old_version + "+imagectl1"}
    ]  # fmt: skip

    # --stack: the candidate against what is promoted
    assert cli("promote", str(first.id), "--stack", "local").code == 0
    r = cli("diff", "--stack", "local", "--json")
    assert r.code == 0, r.err
    body = r.json()
    assert body["before"] == first.label and body["after"] == second.label
    assert [c["name"] for c in body["changes"]] == [pinned]

    md = cli("diff", str(first.id), str(second.id), "--format", "markdown")
    assert f"| changed | `{pinned}` | {old_version} | {old_version}+imagectl1 |" in md.out


def test_pins_come_first_and_every_kind_is_named(env, cli, tmp_path, real_inventory) -> None:
    debs = real_inventory["dpkg"]
    held = [debs[-1]["name"]]
    newer = json.loads(json.dumps(real_inventory))
    newer["dpkg"][-1]["version"] += "+1"  # the pin, last by name
    removed = newer["dpkg"].pop(0)  # a package by name before it
    newer["python"].append({"name": "zzz-new", "version": "1.0"})
    first = _with_sbom(env, tmp_path, real_inventory, held, "a")
    second = _with_sbom(env, tmp_path, newer, held, "b")
    r = cli("diff", str(first.id), str(second.id), "--json")
    changes = r.json()["changes"]
    assert [(c["section"], c["kind"], c["name"]) for c in changes] == [
        ("pinned", "changed", debs[-1]["name"]),
        ("packages", "removed", removed["name"]),
        ("python", "added", "zzz-new"),
    ]
    assert r.json()["counts"] == {"changed": 1, "added": 1, "removed": 1}


def test_an_image_without_an_sbom_is_bad_input(env, cli, tmp_path, real_inventory) -> None:
    with_sbom = _with_sbom(env, tmp_path, real_inventory, [], "x")
    without = env.validated()
    r = cli("diff", str(with_sbom.id), str(without.id))
    assert r.code == 2 and "has no SBOM" in r.err
    assert cli("diff", "--stack", "local").code == 2  # nothing promoted to compare with
