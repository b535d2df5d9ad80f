"""Models round-trip and the repository API, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import IllegalTransition
from imagectl.catalog.models import AppendOnlyViolation, Event, Pointer, Promotion, ValidationRun
from imagectl.core.errors import UserError
from imagectl.validators.receipt import Receipt
from tests.support import make_receipt

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
MANIFEST = {"builds": [{"name": "aws", "artifact_id": "us-east-1:ami-0aaa", "custom_data": {}}]}
RECEIPT = make_receipt(
    "ami-0aaa", "h100-training", "sha256:" + "ab" * 32, profile="full", host="Größe ✓"
).model_copy(update={"validator_version": "0.1.0"})


def _build(s, build_id: str = "b-1", stack: str = "h100-training", cloud: str = "aws"):
    return repo.record_build(
        s,
        build_id=build_id,
        stack=stack,
        stack_digest="sha256:" + "ab" * 32,
        cloud=cloud,
        git_commit="0123456789abcdef0123456789abcdef01234567",
        started_at=T0,
    )


def test_models_round_trip(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        build = _build(s)
        repo.finish_build(
            s, build, outcome="succeeded", finished_at=T0 + timedelta(minutes=42),
            packer_manifest=MANIFEST, artifact_id="us-east-1:ami-0aaa",
        )  # fmt: skip
        img = repo.record_image(
            s, build=build, cloud_image_id="ami-0aaa", region="us-east-1",
            tags={"imagectl:stack": "h100-training", "n": 3}, created_at=T0,
        )  # fmt: skip
        repo.set_state(s, img, "validating", reason="start")
        repo.record_receipt(
            s, img, shape="p5.48xlarge", host="i-0123", receipt=RECEIPT, received_at=T0
        )
        repo.set_state(s, img, "validated", reason="receipts pass")
        promo = repo.start_promotion(s, img, target_regions=["us-east-1"], actor="alice")
        repo.set_pointer(s, "h100-training", "aws", "us-east-1", img)
        repo.finish_promotion(s, promo, completed_regions=["us-east-1"])
        image_id = img.id

    with catalog.transaction() as s:
        got = repo.get_image(s, image_id)
        assert got is not None
        assert (got.cloud, got.region, got.cloud_image_id) == ("aws", "us-east-1", "ami-0aaa")
        assert got.state == "promoted"
        assert got.tags == {"imagectl:stack": "h100-training", "n": 3}
        assert got.created_at == T0 and got.created_at.tzinfo is not None
        assert got.stack_digest == "sha256:" + "ab" * 32
        b = got.build
        assert b is not None and b.build_id == "b-1" and b.outcome == "succeeded"
        assert b.packer_manifest == MANIFEST and b.artifact_id == "us-east-1:ami-0aaa"
        assert b.finished_at - b.started_at == timedelta(minutes=42)  # type: ignore[operator]
        (run,) = repo.receipts(s, got)
        assert isinstance(run, ValidationRun)
        assert run.body == RECEIPT and run.verdict == "pass" and run.worst_action == "NONE"
        assert run.receipt["host"] == {"hostname": "Größe ✓"}  # stored as JSON, unicode kept
        assert (run.shape, run.host, run.profile, run.validator_version) == (
            "p5.48xlarge", "i-0123", "full", "0.1.0",
        )  # fmt: skip
        assert run.received_at == T0
        promo2 = s.scalar(select(Promotion))
        assert promo2 is not None
        assert promo2.state == "succeeded" and promo2.actor == "alice"
        assert promo2.target_regions == ["us-east-1"] and promo2.completed_regions == ["us-east-1"]
        assert promo2.forced is False and promo2.finished_at is not None
        kinds = [e.kind for e in reversed(repo.events(s, stack="h100-training"))]
        assert kinds == [
            "build.started", "build.succeeded", "image.recorded", "image.state",
            "validation.receipt", "image.state", "image.state", "pointer.set", "image.state",
        ]  # fmt: skip


def test_duplicates_are_refused(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        build = _build(s)
        repo.record_image(s, build=build, cloud_image_id="ami-1", region="us-east-1")
    with (
        pytest.raises(UserError, match=r"build b-1 is already in the catalog"),
        catalog.transaction() as s,
    ):
        _build(s)
    with (
        pytest.raises(UserError, match=r"ami-1 in aws/us-east-1 is already in the catalog"),
        catalog.transaction() as s,
    ):
        repo.record_image(
            s, cloud_image_id="ami-1", region="us-east-1", cloud="aws", stack="x",
            stack_digest="d",
        )  # fmt: skip
    with catalog.transaction() as s:  # the same id in another region is another image
        repo.record_image(s, build=build, cloud_image_id="ami-1", region="eu-west-1")


def test_pointer_keeps_previous(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        build = _build(s)
        a = repo.record_image(s, build=build, cloud_image_id="ami-a", region="us-east-1")
        b = repo.record_image(s, build=build, cloud_image_id="ami-b", region="us-east-1")
        c = repo.record_image(s, build=build, cloud_image_id="ami-c", region="us-east-1")
        other = repo.record_image(s, build=build, cloud_image_id="ami-x", region="eu-west-1")
        assert repo.get_pointer(s, "h100-training", "aws", "us-east-1") is None
        p = repo.set_pointer(s, "h100-training", "aws", "us-east-1", a)
        assert p.image_id == a.id and p.previous_image_id is None
        repo.set_pointer(s, "h100-training", "aws", "us-east-1", b)
        repo.set_pointer(s, "h100-training", "aws", "us-east-1", b)  # same image: no change
        ids = (a.id, b.id, c.id)
        with pytest.raises(UserError, match=r"cannot be latest of h100-training on aws/us-east-1"):
            repo.set_pointer(s, "h100-training", "aws", "us-east-1", other)
    with catalog.transaction() as s:
        p = repo.get_pointer(s, "h100-training", "aws", "us-east-1")
        assert p is not None
        assert (p.image_id, p.previous_image_id) == (ids[1], ids[0])
        assert p.image.cloud_image_id == "ami-b"
        assert p.previous_image is not None and p.previous_image.cloud_image_id == "ami-a"
        repo.set_pointer(s, "h100-training", "aws", "us-east-1", ids[2], actor="bob")
    with catalog.transaction() as s:
        p = repo.get_pointer(s, "h100-training", "aws", "us-east-1")
        assert p is not None and (p.image_id, p.previous_image_id) == (ids[2], ids[1])
        assert p.updated_by == "bob"
        assert len(s.scalars(select(Pointer)).all()) == 1
        moves = repo.events(s, kind="pointer.set")
        assert len(moves) == 4 and moves[0].details["previous_image_id"] == ids[1]


def test_event_log_is_append_only(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        ev = repo.log_event(s, "note", "hello", stack="local", cloud="local", details={"k": 1})
        event_id = ev.id
    with pytest.raises(AppendOnlyViolation), catalog.transaction() as s:
        row = s.get(Event, event_id)
        assert row is not None
        row.message = "rewritten"
    with pytest.raises(AppendOnlyViolation), catalog.transaction() as s:
        s.delete(s.get(Event, event_id))
    with catalog.transaction() as s:
        (row,) = repo.events(s, stack="local")
        assert (row.kind, row.message, row.details) == ("note", "hello", {"k": 1})
        assert row.actor  # the OS user or $IMAGECTL_ACTOR


def test_list_images_filters(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        b1 = _build(s, "b-1", "h100-training", "aws")
        b2 = _build(s, "b-2", "local", "local")
        for n, region in enumerate(["us-east-1", "us-west-2"]):
            repo.record_image(s, build=b1, cloud_image_id=f"ami-{n}", region=region)
        loc = repo.record_image(s, build=b2, cloud_image_id="/img/1.qcow2", region="local-a")
        repo.set_state(s, loc, "validating", reason="x")
    with catalog.transaction() as s:
        assert {i.cloud_image_id for i in repo.list_images(s, stack="h100-training")} == {
            "ami-0", "ami-1",
        }  # fmt: skip
        assert [i.cloud_image_id for i in repo.list_images(s, cloud="local")] == ["/img/1.qcow2"]
        assert [i.cloud_image_id for i in repo.list_images(s, state="validating")] == [
            "/img/1.qcow2"
        ]
        both = repo.list_images(s, state=["built", "validating"])
        assert len(both) == 3
        assert [i.cloud_image_id for i in repo.list_images(s, region="us-west-2")] == ["ami-1"]
        assert repo.stacks_and_clouds(s) == [("h100-training", "aws"), ("local", "local")]
        with pytest.raises(UserError, match=r"unknown image state 'gone'"):
            repo.list_images(s, state="gone")


def test_a_receipt_is_recorded_with_its_own_verdict_action_and_profile(catalog: Catalog) -> None:
    """The row's verdict, worst action, profile and validator version are copied from the
    receipt (one source); a value the model refuses never reaches the catalog."""
    with catalog.transaction() as s:
        img = repo.record_image(
            s, cloud_image_id="img", region="r", cloud="gcp", stack="x", stack_digest="d"
        )
        image_id = img.id
    failing = make_receipt("img", "x", "d", verdict="fail", worst_action="BLOCK_IMAGE")
    with catalog.transaction() as s:
        run = repo.record_receipt(s, image_id, shape="a3", host="h1", receipt=failing)
        assert (run.verdict, run.worst_action, run.profile, run.validator_version) == (
            "fail", "BLOCK_IMAGE", "boot", "test",
        )  # fmt: skip
        assert run.body.failed_checks[0].id == "sw.driver.version"
        assert repo.get_image(s, image_id).state == "built"  # type: ignore[union-attr]
    body = failing.model_dump(mode="json")
    for field, value in (("verdict", "maybe"), ("worst_action", "EXPLODE")):
        with pytest.raises(ValidationError, match=field):
            Receipt.model_validate({**body, field: value})


def _validated(s, cloud_image_id: str = "ami-1", region: str = "us-east-1"):
    img = repo.record_image(
        s, cloud_image_id=cloud_image_id, region=region, cloud="aws", stack="h100-training",
        stack_digest="d", state="validated",
    )  # fmt: skip
    return img


def test_partial_promotion_then_resume(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = _validated(s)
        p1 = repo.start_promotion(s, img, target_regions=["us-east-1", "eu-west-1"])
        assert img.state == "promoting"
        repo.finish_promotion(s, p1, completed_regions=["us-east-1"], message="eu quota")
        assert (p1.state, img.state) == ("partial", "partially_promoted")
        assert p1.completed_regions == ["us-east-1"]
        p2 = repo.start_promotion(s, img, target_regions=["eu-west-1"])
        repo.finish_promotion(s, p2, completed_regions=["eu-west-1"])
        assert (p2.state, img.state) == ("succeeded", "promoted")
        msgs = [e.message for e in repo.events(s, image=img, kind="image.state")]
        assert any("missing eu-west-1: eu quota" in m for m in msgs)


def test_failed_promotion_returns_to_the_previous_state(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = _validated(s)
        p = repo.start_promotion(s, img, target_regions=["us-east-1"])
        repo.finish_promotion(s, p, completed_regions=[], message="API down")
        assert (p.state, img.state) == ("failed", "validated")


def test_forced_promotion_needs_a_reason_and_is_recorded(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = repo.record_image(
            s, cloud_image_id="ami-9", region="us-east-1", cloud="aws", stack="h100-training",
            stack_digest="d", state="inconclusive",
        )  # fmt: skip
        image_id = img.id
    with (
        pytest.raises(IllegalTransition, match=r"'inconclusive' to 'promoting'"),
        catalog.transaction() as s,
    ):
        repo.start_promotion(s, image_id, target_regions=["us-east-1"])
    with (
        pytest.raises(UserError, match=r"forced promotion of ami-9 .* needs a reason"),
        catalog.transaction() as s,
    ):
        repo.start_promotion(s, image_id, target_regions=["us-east-1"], forced=True)
    with catalog.transaction() as s:
        p = repo.start_promotion(
            s, image_id, target_regions=["us-east-1"], forced=True,
            force_reason="validator host pool down; incident 42", actor="carol",
        )  # fmt: skip
        repo.finish_promotion(s, p, completed_regions=[])
        assert p.image.state == "inconclusive"  # failed: back where it came from
    with catalog.transaction() as s:
        row = s.scalar(select(Promotion))
        assert row is not None and row.forced and row.actor == "carol"
        assert row.force_reason == "validator host pool down; incident 42"
        ev = repo.events(s, image=image_id, kind="image.state")[-1]
        assert ev.details["forced"] is True and "forced: validator host pool down" in ev.message


def test_json_columns_track_in_place_changes(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = repo.record_image(
            s, cloud_image_id="img", region="r", cloud="gcp", stack="x", stack_digest="d",
            tags={"a": 1},
        )  # fmt: skip
        image_id = img.id
    with catalog.transaction() as s:
        got = repo.get_image(s, image_id)
        assert got is not None
        got.tags["b"] = 2
    with catalog.transaction() as s:
        got = repo.get_image(s, image_id)
        assert got is not None and got.tags == {"a": 1, "b": 2}


def test_pointer_refuses_blocked_and_deleted_images(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = _validated(s)
        repo.set_state(s, img, "blocked", reason="CVE")
        with pytest.raises(UserError, match=r"ami-1 .* is blocked and cannot become latest"):
            repo.set_pointer(s, "h100-training", "aws", "us-east-1", img)
        assert repo.get_pointer(s, "h100-training", "aws", "us-east-1") is None


def test_a_promotion_finishes_once(catalog: Catalog) -> None:
    with catalog.transaction() as s:
        img = _validated(s)
        p = repo.start_promotion(s, img, target_regions=["us-east-1"])
        repo.finish_promotion(s, p, completed_regions=["us-east-1"])
        with pytest.raises(UserError, match=r"already finished \(succeeded\)"):
            repo.finish_promotion(s, p, completed_regions=[])
        assert img.state == "promoted"
