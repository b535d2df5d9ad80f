"""``imagectl promote --canary`` where the stack leaves the watcher off: the canary is set
(a person may want it), but with a loud warning naming the setting, in the text output
and in ``--json``: without the watcher the canary's nodes export no Xid or hardware
findings and ``imagectl rollout`` holds it forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.promotion import promote

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(world, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", world.db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(world.registry))
    monkeypatch.setenv("IMAGECTL_ROOT", str(REPO))


def test_a_canary_without_the_watcher_is_set_with_a_warning(world, env, cli) -> None:
    assert not world.stack.stack.validation.watcher  # the shipped local stack: off
    old = world.validated()
    assert promote(world.catalog, world.provider(), world.stack, old.id).exit_code == 0
    new = world.validated()
    r = cli("promote", new.cloud_image_id, "--stack", "local", "--cloud", "local", "--canary")
    assert r.code == 0, r.out + r.err
    assert "warning: stack local leaves the passive watcher off" in r.err
    assert "validation.watcher: true" in r.err and "rollout will hold" in r.err
    again = world.validated()
    j = cli("promote", again.cloud_image_id, "--stack", "local", "--cloud", "local",
            "--canary", "--json")  # fmt: skip
    assert j.code == 0, j.out + j.err
    (warning,) = j.json()["warnings"]
    assert "validation.watcher: true" in warning
