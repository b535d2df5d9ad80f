"""``.image`` is the image's id (its cloud image id) in every ``--json`` that names one
image: ``verify`` (from the catalog and offline alike), ``attest``, ``block`` and
``revoke``; the catalog's label is ``.label`` beside it. Before, ``verify --json`` gave the
catalog's label ("ami-... (local/local-a, stack local)") from the catalog and the bare id
offline, ``attest --json`` the catalog's row number, and ``block``/``revoke`` the label."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


def test_image_is_the_id_in_every_json(env, cli, tmp_path: Path) -> None:
    image, other = env.validated(), env.validated()
    ident = image.cloud_image_id
    r = cli("verify", str(image.id), "--json")
    assert r.code == 0, r.err
    assert r.json()["image"] == ident and r.json()["label"].startswith(f"{ident} (")
    envelope = tmp_path / "e.json"
    envelope.write_text(cli("verify", str(image.id), "--export-envelope").out)
    r = cli("verify", ident, "--envelope", str(envelope), "--cloud", "local", "--json")
    assert r.json()["image"] == ident, r.err
    r = cli("attest", str(image.id), "--json")
    assert r.code == 0, r.err
    assert (r.json()["image"], r.json()["catalog_id"]) == (ident, image.id)
    r = cli("block", str(image.id), "--reason", "kernel panics", "--json")
    assert r.code == 0, r.err
    assert r.json()["image"] == ident and ident in r.json()["label"]
    r = cli("revoke", str(other.id), "--reason", "recalled", "--json")
    assert r.code == 0, r.err
    assert r.json()["image"] == other.cloud_image_id
