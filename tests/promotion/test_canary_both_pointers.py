"""Both pointers under one lock, on each cloud's emulator (moto, the Compute and ARM fakes).

A canary move takes the stack's promotion lock, as promote and rollback do (a held lock
refuses it, and nothing moves), and is recorded in the catalog before the cloud's pointer
moves (a ``canary.moving`` event, there even when the cloud refuses the move). After
``rollout`` advances a canary, the canary pointer still names the promoted image;
``rollback`` of latest then moves it back too, so the rolled-back image is named by neither
pointer (before, canary nodes went on deploying it).
"""

from __future__ import annotations

from typing import Any

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.locks import PromotionLocked, promotion_lock
from imagectl.promotion import promote, rollback
from imagectl.rollout.canary import CANARY_MOVING, canary_back, canary_pointers, set_canary

STACK = "h100-training"


def _canary(cloud: Any, provider: Any) -> dict[str, str | None]:
    return {r: provider.get_canary_pointer(STACK, r) for r in cloud.regions}


def _latest(cloud: Any, provider: Any) -> dict[str, str | None]:
    return {r: provider.get_pointer(STACK, r) for r in cloud.regions}


def _group_cloud_ids(cloud: Any, pk: int) -> set[str]:
    from imagectl.promotion.groups import group_rows

    with cloud.catalog.transaction() as s:
        return {r.cloud_image_id for r in group_rows(s, repo.image_row(s, pk))}


def test_a_rolled_back_image_is_named_by_neither_pointer(cloud: Any) -> None:
    provider = cloud.provider()
    old = cloud.seed()
    assert promote(cloud.catalog, provider, cloud.resolved, old.id, poll_s=0.01).state == (
        "promoted"
    )
    new = cloud.seed()
    moved = set_canary(cloud.catalog, provider, cloud.resolved, new.id).moved
    assert moved and all(to == new.cloud_image_id for _f, to in moved.values())
    # the rollout advances it: latest names the candidate, the canary still does
    result = promote(cloud.catalog, provider, cloud.resolved, new.id, poll_s=0.01)
    assert result.state == "promoted", result.regions
    ids = _group_cloud_ids(cloud, new.id)
    assert {p for p in _latest(cloud, provider).values()} <= ids
    assert any(p in ids for p in _canary(cloud, provider).values())
    # latest rolled back: the candidate is named by neither pointer, in the cloud or the
    # catalog
    back = rollback(cloud.catalog, provider, STACK, reason="NCCL hangs after the advance")
    assert back.canary, "the canary pointer was not moved back"
    assert not ids & {p for p in _latest(cloud, provider).values() if p}
    assert not ids & {p for p in _canary(cloud, provider).values() if p}
    with cloud.catalog.transaction() as s:
        assert [p.image.cloud_image_id for p in canary_pointers(s, STACK, cloud.cloud)
                if p.image.cloud_image_id in ids] == []  # fmt: skip
        assert {e.details["to"] for e in repo.events(s, kind="canary.rolled_back")} == {None}
    assert back.to_dict()["canary"] == {
        r: {"from": a, "to": None} for r, (a, _b) in back.canary.items()
    }


def test_canary_moves_take_the_promotion_lock(cloud: Any) -> None:
    provider = cloud.provider()
    first = cloud.seed()
    with promotion_lock(cloud.catalog, STACK, cloud.cloud):
        with pytest.raises(PromotionLocked):
            set_canary(cloud.catalog, provider, cloud.resolved, first.id, lock_wait_s=0)
    assert set(_canary(cloud, provider).values()) == {None}  # nothing moved
    set_canary(cloud.catalog, provider, cloud.resolved, first.id)
    with promotion_lock(cloud.catalog, STACK, cloud.cloud):
        with pytest.raises(PromotionLocked):
            canary_back(cloud.catalog, provider, STACK, reason="x", lock_wait_s=0)
    assert first.cloud_image_id in set(_canary(cloud, provider).values())
    # each move was recorded before it acted: a canary.moving event ahead of its canary.set
    with cloud.catalog.transaction() as s:
        kinds = [e.kind for e in sorted(repo.events(s, stack=STACK, cloud=cloud.cloud),
                                        key=lambda e: e.id)
                 if e.kind.startswith("canary.")]  # fmt: skip
    assert kinds and kinds[0] == CANARY_MOVING
    assert kinds == [CANARY_MOVING, "canary.set"] * (len(kinds) // 2)


@pytest.mark.parametrize("cloud", ["gcp"], indirect=True)
def test_a_refused_move_is_on_record(cloud: Any) -> None:
    """On Compute, an image already in latest's family cannot also be the canary: the
    cloud refuses the move, and the catalog holds the attempt (recorded before it acted)
    while no canary row claims it moved."""
    from imagectl.core.errors import CloudError

    provider = cloud.provider()
    img = cloud.seed()
    assert promote(cloud.catalog, provider, cloud.resolved, img.id, poll_s=0.01).state == (
        "promoted"
    )
    with pytest.raises(CloudError, match="one image has one family"):
        set_canary(cloud.catalog, provider, cloud.resolved, img.id)
    with cloud.catalog.transaction() as s:
        moving = repo.events(s, kind=CANARY_MOVING, stack=STACK)
        assert moving and moving[0].details["from"] is None
        assert canary_pointers(s, STACK, cloud.cloud) == []


@pytest.mark.parametrize("cloud", ["gcp"], indirect=True)  # the rollback above runs on all
def test_revoking_an_advanced_canary_clears_both_pointers(cloud: Any) -> None:
    """``revoke`` (and ``block`` of a promoted image, which revokes it) rolls latest back
    first; the canary pointer naming the same image moves back with it."""
    from imagectl.promotion.revoke import revoke_image

    provider = cloud.provider()
    old = cloud.seed()
    promote(cloud.catalog, provider, cloud.resolved, old.id, poll_s=0.01)
    new = cloud.seed()
    set_canary(cloud.catalog, provider, cloud.resolved, new.id)
    assert promote(cloud.catalog, provider, cloud.resolved, new.id, poll_s=0.01).state == (
        "promoted"
    )
    ids = _group_cloud_ids(cloud, new.id)
    revoked = revoke_image(cloud.catalog, provider, new.id, reason="recalled")
    assert revoked.rolled_back
    assert not ids & {p for p in _latest(cloud, provider).values() if p}
    assert not ids & {p for p in _canary(cloud, provider).values() if p}
