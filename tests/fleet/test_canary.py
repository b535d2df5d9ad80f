"""``imagectl promote --canary`` on the local cloud: the canary pointer is
a file beside "latest" in each region the image is in, and a ``canary_pointers`` row; the
same gate as promote; nothing copied; moved back to the image it named before, or removed;
an image a canary names is not deleted; the clouds without one say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagectl.core.errors import UserError
from imagectl.promotion import GateRefused, promote
from imagectl.rollout.canary import canary_back, canary_image, set_canary

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(world, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", world.db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(world.registry))
    monkeypatch.setenv("IMAGECTL_ROOT", str(REPO))


def test_promote_canary_points_the_canary_where_the_image_is(world, env, cli) -> None:
    old = world.validated()
    assert promote(world.catalog, world.provider(), world.stack, old.id).exit_code == 0
    new = world.validated()
    r = cli("promote", new.cloud_image_id, "--stack", "local", "--cloud", "local", "--canary",
            "--json")  # fmt: skip
    assert r.code == 0, r.out + r.err
    assert r.json()["moved"] == {"build": {"from": None, "to": new.cloud_image_id}}
    canary_file = world.registry / "build" / "stacks" / "local" / "canary"
    assert canary_file.read_text().strip() == new.cloud_image_id
    # latest untouched, nothing copied, the image still only validated
    assert {world.provider().get_pointer("local", r) for r in ("local-a", "local-b")} == {
        old.cloud_image_id
    }
    assert world.region_files("local-a") and len(world.region_files("local-a")) == 1
    assert world.image(new.id).state == "validated"
    with world.catalog.transaction() as s:
        assert canary_image(s, "local", "local").id == new.id
    assert any(e.kind == "canary.set" for e in world.events())
    # text output names the move
    again = cli("promote", new.cloud_image_id, "--stack", "local", "--canary")
    assert again.code == 0 and f"canary of local in build: {new.cloud_image_id}" in again.out


def test_the_canary_goes_through_the_gate(world, env, cli) -> None:
    failed = world.validated(verdict="fail", state="validating")
    with pytest.raises(GateRefused):
        set_canary(world.catalog, world.provider(), world.stack, failed.id)
    blocked = world.validated(state="blocked")
    r = cli("promote", str(blocked.id), "--canary")
    assert r.code == 1 and "blocked" in r.err
    assert world.provider().get_canary_pointer("local", "build") is None


def test_canary_takes_no_promotion_options(world, env, cli) -> None:
    img = world.validated()
    for extra in (["--force", "--reason", "x"], ["--dry-run"], ["--regions", "local-a"]):
        r = cli("promote", str(img.id), "--canary", *extra)
        assert r.code == 2 and "--canary takes no" in r.err, extra


def test_back_to_the_previous_canary_or_removed(world) -> None:
    first, second = world.validated(), world.validated()
    provider = world.provider()
    set_canary(world.catalog, provider, world.stack, first.id)
    set_canary(world.catalog, provider, world.stack, second.id)
    assert provider.get_canary_pointer("local", "build") == second.cloud_image_id
    moved = canary_back(world.catalog, provider, "local", reason="test")
    assert moved == {"build": (second.cloud_image_id, first.cloud_image_id)}
    assert provider.get_canary_pointer("local", "build") == first.cloud_image_id
    moved = canary_back(world.catalog, provider, "local", reason="test")
    assert moved == {"build": (first.cloud_image_id, None)}
    assert provider.get_canary_pointer("local", "build") is None
    with world.catalog.transaction() as s:
        assert canary_image(s, "local", "local") is None


def test_an_image_a_canary_names_is_not_deleted(world) -> None:
    from imagectl.core.errors import CloudError

    img = world.validated()
    provider = world.provider()
    set_canary(world.catalog, provider, world.stack, img.id)
    cloud_image = provider.get_image(img.cloud_image_id, "build")
    with pytest.raises(CloudError, match="is the canary of local"):
        provider.delete(cloud_image)


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure", "local"])
def test_every_cloud_has_its_canary_pointer(cloud: str) -> None:
    """Each cloud implements the pointer (tests/clouds/test_<cloud>_canary.py on its
    emulator); the base class's refusal is for a cloud added without one."""
    import importlib
    import inspect

    from imagectl.clouds.base import Provider
    from imagectl.clouds.registry import cloud_spec

    module = importlib.import_module(cloud_spec(cloud).provider_module)
    (cls,) = [c for _n, c in inspect.getmembers(module, inspect.isclass)
              if issubclass(c, Provider) and c.__module__ == module.__name__]  # fmt: skip
    for name in ("get_canary_pointer", "set_canary_pointer"):
        assert getattr(cls, name) is not getattr(Provider, name), (cloud, name)
    from types import SimpleNamespace

    bare: Any = SimpleNamespace(cloud="new")  # the base's method reads only the cloud's name
    with pytest.raises(UserError, match="not implemented on the new cloud yet"):
        Provider.set_canary_pointer(bare, "s", "r", "i")


def test_a_canary_in_several_regions_goes_back_in_each(world) -> None:
    """An image already copied (promoted) is in four regions: the canary points at each
    region's copy, and moves back in each."""
    img = world.validated()
    provider = world.provider()
    assert promote(world.catalog, provider, world.stack, img.id).exit_code == 0
    moved = set_canary(world.catalog, provider, world.stack, img.id).moved
    assert sorted(moved) == ["build", "local-a", "local-b", "local-c"]
    for region in moved:
        assert provider.get_canary_pointer("local", region) == img.cloud_image_id
    back = canary_back(world.catalog, provider, "local", reason="test")
    assert sorted(back) == sorted(moved) and all(to is None for _f, to in back.values())
    for region in moved:
        assert provider.get_canary_pointer("local", region) is None
    with world.catalog.transaction() as s:
        assert canary_image(s, "local", "local") is None


def test_block_and_revoke_move_a_canary_back_first(world, env, cli) -> None:
    first, second = world.validated(), world.validated()
    provider = world.provider()
    set_canary(world.catalog, provider, world.stack, first.id)
    set_canary(world.catalog, provider, world.stack, second.id)
    r = cli("block", str(second.id), "--reason", "NCCL hangs", "--json")
    assert r.code == 0, r.err
    assert r.json()["canary_back"] == {"build": first.cloud_image_id}
    assert provider.get_canary_pointer("local", "build") == first.cloud_image_id
    r = cli("revoke", str(first.id), "--reason", "recalled", "--json")
    assert r.code == 0, r.err
    assert r.json()["canary_back"] == {"build": None}
    assert provider.get_canary_pointer("local", "build") is None
    # an image no canary names: nothing moves
    third = world.validated()
    r = cli("block", str(third.id), "--reason", "x")
    assert r.code == 0 and "canary in" not in r.out


def test_rollback_canary_moves_only_the_canary(world, env, cli) -> None:
    old = world.validated()
    assert promote(world.catalog, world.provider(), world.stack, old.id).exit_code == 0
    new = world.validated()
    set_canary(world.catalog, world.provider(), world.stack, new.id)
    r = cli("rollback", "--stack", "local", "--canary", "--json")
    assert r.code == 0, r.err
    assert r.json()["canary"] == {"build": {"from": new.cloud_image_id, "to": None}}
    assert world.provider().get_pointer("local", "local-a") == old.cloud_image_id
    assert world.image(new.id).state == "validated"  # not blocked: only moved back
    again = cli("rollback", "--stack", "local", "--canary")
    assert again.code == 2 and "has no canary" in again.err
