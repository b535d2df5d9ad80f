"""The image state machine: every legal move works through the catalog, illegal ones are
refused with a message naming the image, both states and the allowed targets."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import (
    FORCED_TRANSITIONS,
    TRANSITIONS,
    IllegalTransition,
    ImageState,
    check_transition,
)
from imagectl.catalog.models import Image
from imagectl.core.errors import EXIT_BAD_INPUT, UserError

S = ImageState
LEGAL = [(a, b) for a, targets in TRANSITIONS.items() for b in sorted(targets)]


def test_table_covers_every_state_and_follows_the_documented_chain() -> None:
    assert set(TRANSITIONS) == set(ImageState)
    chain = [
        (S.BUILT, S.VALIDATING),
        (S.VALIDATING, S.VALIDATED),
        (S.VALIDATING, S.BLOCKED),
        (S.VALIDATING, S.INCONCLUSIVE),
        (S.VALIDATED, S.PROMOTING),
        (S.PROMOTING, S.PROMOTED),
        (S.PROMOTING, S.PARTIALLY_PROMOTED),
        (S.PROMOTED, S.ROLLED_BACK),
        (S.PROMOTED, S.DEPRECATED),
        (S.PARTIALLY_PROMOTED, S.ROLLED_BACK),
        (S.PARTIALLY_PROMOTED, S.DEPRECATED),
        (S.ROLLED_BACK, S.DELETED),
        (S.DEPRECATED, S.DELETED),
        # extras
        (S.INCONCLUSIVE, S.VALIDATING),
        (S.PARTIALLY_PROMOTED, S.PROMOTING),
        (S.VALIDATED, S.BLOCKED),
        (S.ROLLED_BACK, S.DEPRECATED),
        (S.BLOCKED, S.DELETED),
    ]
    missing = [(a.value, b.value) for a, b in chain if b not in TRANSITIONS[a]]
    assert missing == []
    assert TRANSITIONS[S.DELETED] == frozenset()
    # every state except built is reachable from built
    reachable, todo = {S.BUILT}, [S.BUILT]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in reachable:
                reachable.add(nxt)
                todo.append(nxt)
    assert reachable == set(ImageState)


ILLEGAL = [
    (S.BUILT, S.PROMOTED),
    (S.BUILT, S.VALIDATED),
    (S.VALIDATING, S.PROMOTING),
    (S.BLOCKED, S.PROMOTING),
    (S.BLOCKED, S.VALIDATED),
    (S.PROMOTED, S.VALIDATING),
    (S.DELETED, S.BUILT),
    (S.DEPRECATED, S.PROMOTED),
    (S.INCONCLUSIVE, S.PROMOTING),  # only when forced
]


@pytest.mark.parametrize(("old", "new"), ILLEGAL, ids=[f"{a.value}->{b.value}" for a, b in ILLEGAL])
def test_illegal_transition_message(old: ImageState, new: ImageState) -> None:
    with pytest.raises(IllegalTransition) as info:
        check_transition("ami-0abc (aws/us-east-1)", old, new)
    err = info.value
    assert isinstance(err, UserError) and err.exit_code == EXIT_BAD_INPUT
    text = str(err)
    assert "ami-0abc (aws/us-east-1)" in text
    assert f"from '{old.value}' to '{new.value}'" in text
    allowed = ", ".join(sorted(s.value for s in TRANSITIONS[old])) or "none"
    assert f"allowed from '{old.value}': {allowed}" in text


def test_forced_transition_needs_force() -> None:
    for old, targets in FORCED_TRANSITIONS.items():
        for new in targets:
            assert new not in TRANSITIONS[old]
            assert check_transition("img", old, new, forced=True) is new


def test_unknown_state_name_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"unknown image state 'shipped'.*built, validating"):
        check_transition("img", "built", "shipped")


def _image_in(session: Session, state: ImageState, n: int) -> Image:
    return repo.record_image(
        session,
        cloud_image_id=f"ami-{n:04d}",
        region="us-east-1",
        cloud="aws",
        stack="h100-training",
        stack_digest="sha256:feed",
        state=state,
    )


def test_every_legal_transition_through_the_catalog(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        ids = {}
        for n, (old, new) in enumerate(LEGAL):
            img = _image_in(s, old, n)
            repo.set_state(s, img, new, reason=f"test {old.value}->{new.value}", actor="tester")
            ids[(old, new)] = img.id
    with catalog.transaction() as s:
        for (old, new), image_id in ids.items():
            img = repo.get_image(s, image_id)
            assert img is not None and img.state == new.value, (old, new)
            (ev,) = repo.events(s, image=img, kind="image.state")
            assert ev.actor == "tester"
            assert ev.details["from"] == old.value and ev.details["to"] == new.value
            assert f"{old.value} -> {new.value}" in ev.message


def test_illegal_transition_through_the_catalog_changes_nothing(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = _image_in(s, S.BUILT, 1)
        image_id = img.id
    with (
        pytest.raises(IllegalTransition, match=r"ami-0001 \(aws/us-east-1.*'built' to 'promoted'"),
        catalog.transaction() as s,
    ):
        repo.set_state(s, image_id, S.PROMOTED, reason="skip the gates")
    with catalog.transaction() as s:
        img2 = repo.get_image(s, image_id)
        assert img2 is not None and img2.state == "built"
        assert repo.events(s, image=image_id, kind="image.state") == []


def test_blocking_records_the_reason(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = _image_in(s, S.VALIDATING, 1)
        repo.set_state(s, img, S.BLOCKED, reason="receipt failed", blocked_reason="NCCL 2 GB/s")
        manual = _image_in(s, S.VALIDATED, 2)
        repo.set_state(s, manual, S.BLOCKED, reason="CVE-2026-1234 in the driver")
    with catalog.transaction() as s:
        blocked = {i.cloud_image_id: i for i in repo.list_images(s, state="blocked")}
        assert blocked["ami-0001"].blocked_reason == "NCCL 2 GB/s"
        assert blocked["ami-0002"].blocked_reason == "CVE-2026-1234 in the driver"


def test_actor_comes_from_the_environment(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMAGECTL_ACTOR", "ci-bot@pipeline")
    assert current_actor() == "ci-bot@pipeline"
    with catalog.transaction() as s:
        img = _image_in(s, S.BUILT, 1)
        repo.set_state(s, img, S.VALIDATING, reason="start")
        (ev,) = repo.events(s, image=img, kind="image.state")
        assert ev.actor == "ci-bot@pipeline"
    monkeypatch.delenv("IMAGECTL_ACTOR")
    import getpass

    assert current_actor() == getpass.getuser()
