"""Hostile configuration: catalog URLs, the state folder, --out, numeric IMAGECTL_* settings
and missing input files. Exit 2, the setting or file named, no password echoed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.support import REPO

PASSWORD = "s3cret-Pw-0xDEAD"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql+psycopg://admin:{PASSWORD}@db:notaport/imagectl",  # bad port
        f"postgresql+psycopg://admin:{PASSWORD}@x@[db/imagectl",  # '@' in it, unparseable
        f"mysql://admin:{PASSWORD}@db/imagectl",  # a backend imagectl does not use
        f"postgresql+psycopg://admin:{PASSWORD}@127.0.0.1:1/imagectl",  # nothing listening
        # libpq's parameters in the query
        f"postgresql+psycopg://admin@127.0.0.1:1/imagectl?password={PASSWORD}",
        f"postgresql+psycopg://admin@127.0.0.1:1/db?sslmode=require&sslpassword={PASSWORD}",
        f"postgresql+psycopg://admin@db:notaport/imagectl?password={PASSWORD}",
    ],
)
def test_catalog_url_problems_never_echo_the_password(url: str, hostile) -> None:
    res = hostile("status", env={"IMAGECTL_DATABASE_URL": url}, timeout=60)
    assert PASSWORD not in res.out + res.err
    assert "IMAGECTL_DATABASE_URL" in res.text and "***" in res.text


def test_state_folder_that_is_a_file(tmp_path: Path, hostile) -> None:
    state = tmp_path / "state-file"
    state.write_text("not a folder")
    res = hostile("status", env={"IMAGECTL_STATE_DIR": str(state)})
    assert f"cannot use the state folder {state}" in res.text and "IMAGECTL_STATE_DIR" in res.text
    assert state.read_text() == "not a folder"


def test_state_folder_is_created_private(tmp_path: Path, hostile) -> None:
    state = tmp_path / "new-state"
    hostile("status", env={"IMAGECTL_STATE_DIR": str(state)}, code=0)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "catalog.db").stat().st_mode) == 0o600


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_plan_out_that_cannot_be_a_folder(where: str, tmp_path: Path, hostile) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    out = blocker if where == "file" else blocker / "plan"
    res = hostile("--root", str(REPO), "plan", "--stack", "local", "--out", str(out))
    assert str(out) in res.text or str(blocker) in res.text, res.text
    assert blocker.read_text() == "x"
    assert [p.name for p in tmp_path.iterdir() if p.name != "state"] == ["blocker"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("IMAGECTL_CLOUD_POLL_S", "abc"),
        ("IMAGECTL_CLOUD_POLL_S", "nan"),
        ("IMAGECTL_CLOUD_POLL_S", "-1"),
        ("IMAGECTL_LOCAL_LATENCY", "fast"),
        ("IMAGECTL_LOCAL_LATENCY", "local-a=soon"),
    ],
)
def test_numeric_settings_that_are_not_numbers(name: str, value: str, hostile) -> None:
    res = hostile("--root", str(REPO), "rollback", "--stack", "local", env={name: value})
    shown = value.rpartition("=")[2]  # a region's value names the bad number
    assert f"${name}={shown!r} is not a number of seconds" in res.text


def test_validate_nodes_file_that_does_not_exist(tmp_path: Path, hostile) -> None:
    snapshot = REPO / "tests" / "snapshots" / "healthy" / "h100-sxm-8x.json"
    missing = tmp_path / "hostfile"
    res = hostile(
        "validate", "--replay", str(snapshot), "--nodes", str(missing), "--no-hygiene",
        "-o", str(tmp_path / "receipt.json"),
    )  # fmt: skip
    assert f"--nodes hostfile {missing}" in res.text
    assert not (tmp_path / "receipt.json").exists()
