"""Promotion through the Python API on the local registry: gate, parallel copies, pointer
flip, partial promotion and resume, rollback, retention, block and the forced audit trail."""

from __future__ import annotations

import re

import pytest

from imagectl.catalog import repository as repo
from imagectl.core.errors import UserError
from imagectl.promotion import (
    GateRefused,
    ImageBlocked,
    NothingToRollBack,
    block_image,
    promote,
    rollback,
)
from imagectl.promotion.gate import CorruptReceipt
from tests.cli.hints import fill, parse

REGIONS = ["local-a", "local-b", "local-c"]


def _pointers(world) -> dict[str, str | None]:
    provider = world.provider()
    return {r: provider.get_pointer("local", r) for r in REGIONS}


def _catalog_pointers(world) -> dict[str, str]:
    with world.catalog.transaction() as s:
        return {p.region: p.image.cloud_image_id for p in repo.list_pointers(s, stack="local")}


def test_promotes_to_every_region_and_flips_pointers(world) -> None:
    img = world.validated()
    steps: list[tuple[str, str]] = []
    result = promote(
        world.catalog,
        world.provider(latency=0.05),
        world.stack,
        img.id,
        progress=lambda region, step, detail: steps.append((region, step)),
    )
    assert result.state == "promoted" and result.exit_code == 0
    assert result.pointer_flipped
    assert result.previous_pointers == {r: None for r in REGIONS}
    assert _pointers(world) == {r: img.cloud_image_id for r in REGIONS}
    assert _catalog_pointers(world) == {r: img.cloud_image_id for r in REGIONS}
    for region in REGIONS:  # one real file per region, tagged and shared
        (f,) = world.region_files(region)
        assert f.name == img.cloud_image_id.split(":")[1] + ".qcow2"
        meta = world.provider().metadata(img.cloud_image_id, region)
        assert meta["tags"]["imagectl:state"] == "promoted"
        assert meta["shared_with"]["public"] is False
        assert (region, "done") in steps
    with world.catalog.transaction() as s:
        rows = repo.list_images(s, stack="local")
        assert sorted((r.region, r.state) for r in rows) == [
            ("build", "promoted"),
            *[(r, "promoted") for r in REGIONS],
        ]
    kinds = [e.kind for e in world.events(image=img.id)]
    for kind in (
        "promotion.gate",
        "promotion.started",
        "promotion.pointer.flipped",
        "promotion.finished",
        "promotion.region.copy_requested",
        "promotion.region.done",
    ):
        assert kind in kinds
    assert kinds.count("promotion.region.done") == 3


def test_source_region_among_targets_is_not_copied(world) -> None:
    img = world.validated(region="local-a")
    result = promote(world.catalog, world.provider(), world.stack, img.id)
    assert result.state == "promoted"
    requested = [e.details["region"] for e in world.events("promotion.region.copy_requested")]
    assert sorted(requested) == ["local-b", "local-c"]
    assert _catalog_pointers(world)["local-a"] == img.cloud_image_id


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"verdict": "fail"}, "verdict is fail"),
        ({"age_hours": 30}, "h old (maximum 24 h)"),
        ({"receipt_overrides": {"image_id": "sha256:" + "0" * 64}}, "names image sha256:000"),
        ({"receipt_overrides": {"stack_digest": "f" * 64}}, "names stack digest ffffff"),
        ({"receipt_overrides": {"worst_action": "BLOCK_IMAGE"}}, "asks to BLOCK_IMAGE"),
        ({"receipt_overrides": {"stack": "b200-training"}}, "names stack b200-training"),
        ({"digest": "e" * 64}, "built from stack digest eeeeeeeeeeee, but the stack file's"),
        ({"state": "validating"}, "is 'validating', not 'validated'"),
    ],
)
def test_gate_refuses(world, kwargs, why) -> None:
    img = world.validated(**kwargs)
    with pytest.raises(GateRefused, match=re.escape(why)) as info:
        promote(world.catalog, world.provider(), world.stack, img.id)
    assert info.value.exit_code == 1
    assert world.image(img.id).state == kwargs.get("state", "validated")
    assert all(world.provider().get_pointer("local", r) is None for r in REGIONS)
    assert not world.region_files("local-b")
    (gate,) = world.events("promotion.gate", image=img.id)
    assert gate.details["passed"] is False


def test_gate_refuses_image_without_receipt(world) -> None:
    img = world.validated()
    with world.catalog.transaction() as s:
        for run in repo.receipts(s, img.id):
            s.delete(run)
    with pytest.raises(GateRefused, match="no validation receipt"):
        promote(world.catalog, world.provider(), world.stack, img.id)


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ({"finished_at": None}, "finished_at"),
        ({"finished_at": "yesterday"}, "finished_at"),
        ({"verdict": "maybe"}, "verdict"),
        ({"worst_action": "EXPLODE"}, "worst_action"),
        ({"checks": "all good"}, "checks"),
    ],
)
def test_a_stored_receipt_edited_into_nonsense_is_bad_input(world, edit, named) -> None:
    """The catalog stores the receipt the validator wrote; a body changed behind its back
    (by hand, or by a foreign writer) is refused as corrupt, naming the run and field."""
    img = world.validated()
    with world.catalog.transaction() as s:
        (run,) = repo.receipts(s, img.id)
        run.receipt = {**run.receipt, **edit}
        run_id = run.id
    with pytest.raises(CorruptReceipt, match=named) as info:
        promote(world.catalog, world.provider(), world.stack, img.id)
    assert info.value.exit_code == 2
    assert f"receipt {run_id} (qemu-tcg on vm-1)" in info.value.render()


def test_blocked_image_never_promotes_and_force_is_audited(world, monkeypatch) -> None:
    img = world.validated()
    block_image(world.catalog, img.id, reason="NCCL hangs on 2 nodes", actor="bob")
    assert world.image(img.id).state == "blocked"
    with pytest.raises(ImageBlocked, match="blocked \\(NCCL hangs on 2 nodes\\)") as info:
        promote(world.catalog, world.provider(), world.stack, img.id)
    assert info.value.exit_code == 1
    # what can help, never "validate again": a new build, the block's reason, who set it,
    # and the override, each command runnable as written (tests/cli/test_hints.py)
    hint = info.value.hint or ""
    assert "imagectl validate`" not in hint
    assert "`imagectl build --stack local --cloud local`" in hint
    assert "NCCL hangs on 2 nodes" in hint and "set by bob at " in hint
    commands = re.findall(r"`(imagectl [^`]+)`", hint)
    assert len(commands) == 3
    for command in commands:
        parse(fill(command))
    with pytest.raises(UserError, match="needs --reason"):
        promote(world.catalog, world.provider(), world.stack, img.id, force=True)
    monkeypatch.setenv("IMAGECTL_ACTOR", "alice")
    result = promote(
        world.catalog,
        world.provider(),
        world.stack,
        img.id,
        force=True,
        reason="hotfix for CVE-2026-1234, NCCL issue is known",
    )
    assert result.state == "promoted" and result.forced
    assert any("blocked" in r for r in result.overridden)
    (forced,) = world.events("promotion.forced", image=img.id)
    assert forced.actor == "alice"
    assert forced.details["reason"] == "hotfix for CVE-2026-1234, NCCL issue is known"
    assert any("blocked" in r for r in forced.details["overridden"])
    with world.catalog.transaction() as s:
        (promo,) = s.query(__import__("imagectl.catalog.models").catalog.models.Promotion).all()
        assert promo.forced and promo.actor == "alice" and "CVE" in promo.force_reason


def test_promoted_image_cannot_be_blocked(world) -> None:
    img = world.validated()
    promote(world.catalog, world.provider(), world.stack, img.id)
    with pytest.raises(UserError, match="Roll it back first"):
        block_image(world.catalog, img.id, reason="too late")


def test_region_failing_then_succeeding_on_resume(world) -> None:
    img = world.validated()
    first = promote(world.catalog, world.provider(fail={"local-b": "replica"}), world.stack, img.id)
    assert first.state == "partially_promoted" and first.exit_code == 1
    assert first.regions["local-b"].state == "failed"
    assert "injected failure" in (first.regions["local-b"].error or "")
    assert (
        first.resume_command == f"imagectl promote {img.cloud_image_id} --stack local --cloud local"
    )
    assert _pointers(world) == {r: None for r in REGIONS}  # pointer unchanged everywhere
    assert world.image(img.id).state == "partially_promoted"
    assert not world.region_files("local-b")
    second = promote(world.catalog, world.provider(), world.stack, img.id)
    assert second.state == "promoted" and second.resumed
    assert second.regions["local-a"].resumed and second.regions["local-c"].resumed
    assert not second.regions["local-b"].resumed
    assert _pointers(world) == {r: img.cloud_image_id for r in REGIONS}
    tokens = [
        e.details["token"]
        for e in world.events("promotion.region.copy_requested")
        if e.details["region"] == "local-b"
    ]
    assert len(tokens) == 2 and tokens[0] != tokens[1]  # the failed copy is not reused
    for region in REGIONS:
        assert len(world.region_files(region)) == 1
    assert len(world.events("promotion.pointer.flipped")) == 1


def test_region_failing_for_good_leaves_pointer_unchanged(world) -> None:
    old = world.validated()
    promote(world.catalog, world.provider(), world.stack, old.id)
    new = world.validated()
    broken = world.provider(fail={"local-c": "copy"})
    for _ in range(2):
        result = promote(world.catalog, broken, world.stack, new.id)
        assert result.state == "partially_promoted"
        assert "refused" in (result.regions["local-c"].error or "")
        assert _pointers(world) == {r: old.cloud_image_id for r in REGIONS}
        assert _catalog_pointers(world) == {r: old.cloud_image_id for r in REGIONS}
    assert world.image(new.id).state == "partially_promoted"
    assert world.image(old.id).state == "promoted"


def test_all_regions_failing_returns_image_to_validated(world) -> None:
    img = world.validated()
    result = promote(
        world.catalog, world.provider(fail="local-a,local-b,local-c"), world.stack, img.id
    )
    assert result.state == "failed" and result.exit_code == 1
    assert world.image(img.id).state == "validated"


def test_rollback_twice_then_nothing_left(world) -> None:
    images = [world.validated() for _ in range(3)]
    for img in images:  # retention off: keep_last=2 would deprecate images[0]
        result = promote(world.catalog, world.provider(), world.stack, img.id, retention=False)
        assert result.state == "promoted"
    first = rollback(world.catalog, world.provider(), "local", reason="bad kernel")
    assert {r: b for r, (_a, b) in first.moved.items()} == {
        r: images[1].cloud_image_id for r in REGIONS
    }
    assert _pointers(world) == {r: images[1].cloud_image_id for r in REGIONS}
    assert world.image(images[2].id).state == "rolled_back"
    second = rollback(world.catalog, world.provider(), "local")
    assert _pointers(world) == {r: images[0].cloud_image_id for r in REGIONS}
    assert {a for a, _b in second.moved.values()} == {images[1].cloud_image_id}
    with pytest.raises(NothingToRollBack, match="no earlier promoted image") as info:
        rollback(world.catalog, world.provider(), "local")
    assert info.value.exit_code == 2
    assert _pointers(world) == {r: images[0].cloud_image_id for r in REGIONS}
    assert len(world.events("rollback.finished")) == 2


def test_rollback_without_promotion_is_bad_input(world) -> None:
    with pytest.raises(NothingToRollBack, match="no 'latest' pointer"):
        rollback(world.catalog, world.provider(), "local")


def test_retention_keeps_last_k_and_spares_images_in_use(world) -> None:
    provider = world.provider()
    images = [world.validated() for _ in range(4)]  # keep_last is 2 in local.yaml
    promote(world.catalog, provider, world.stack, images[0].id)
    source0 = provider.get_image(images[0].cloud_image_id, "local-b")
    provider.register_instance(source0, instance_id="vm-still-running")
    for img in images[1:3]:
        promote(world.catalog, provider, world.stack, img.id)
    # images[0] fell out of keep_last=2: deprecated except in local-b, where a VM runs it
    with world.catalog.transaction() as s:
        states = {
            r.region: r.state
            for r in repo.list_images(s, stack="local")
            if r.cloud_image_id == images[0].cloud_image_id
        }
    assert states == {
        "build": "deprecated",
        "local-a": "deprecated",
        "local-b": "promoted",
        "local-c": "deprecated",
    }
    meta = provider.metadata(images[0].cloud_image_id, "local-a")
    assert meta["state"] == "deprecated" and meta["replacement"] == images[2].cloud_image_id
    assert provider.metadata(images[0].cloud_image_id, "local-b")["state"] == "available"
    (kept,) = world.events("retention.kept")
    assert "vm-still-running" in kept.message
    provider.terminate(provider.list_instances()[0])
    result = promote(world.catalog, provider, world.stack, images[3].id)
    assert f"{images[0].cloud_image_id} in local-b" in result.deprecated
    assert f"{images[1].cloud_image_id} in local-a" in result.deprecated
    assert world.image(images[2].id).state == "promoted"


def test_dry_run_changes_nothing(world) -> None:
    img = world.validated()
    result = promote(world.catalog, world.provider(), world.stack, img.id, dry_run=True)
    assert result.state == "dry_run" and result.exit_code == 0
    assert sorted(result.regions) == REGIONS
    assert world.image(img.id).state == "validated"
    assert not world.region_files("local-a")
    assert not world.events("promotion.started")


def test_unknown_image_and_region_are_bad_input(world) -> None:
    img = world.validated()
    with pytest.raises(UserError, match="unknown image 'sha256:nope'") as info:
        promote(world.catalog, world.provider(), world.stack, "sha256:nope")
    assert info.value.exit_code == 2
    with pytest.raises(UserError, match="not targets of stack local"):
        promote(world.catalog, world.provider(), world.stack, img.id, regions=["mars-1"])


def test_promote_subset_of_regions(world) -> None:
    img = world.validated()
    result = promote(world.catalog, world.provider(), world.stack, img.id, regions=["local-c"])
    assert result.state == "promoted"
    assert _pointers(world) == {"local-a": None, "local-b": None, "local-c": img.cloud_image_id}
    again = promote(world.catalog, world.provider(), world.stack, img.id, regions=["local-c"])
    assert again.state == "already_promoted" and again.exit_code == 0
    with pytest.raises(UserError, match="already promoted, but not in local-a, local-b"):
        promote(world.catalog, world.provider(), world.stack, img.id)
