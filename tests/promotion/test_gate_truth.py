"""The gate refuses receipts that do not prove the image works: a weaker profile than the
stack asks, a required check that did not run, a replay (unless made with the explicit
--sandbox switch, which is then recorded), a finish time in the future. On SQLite and on
PostgreSQL, through the real catalog and ``check_gate`` / ``promote``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from imagectl.promotion import GateRefused, promote
from imagectl.promotion.gate import check_gate, sandbox_receipts
from tests.support import flat

COMPLETE = {"profile": "quick", "shape_kind": "nvswitch", "required": ["cuda.init"],
            "ran": ["cuda.init"], "not_run": {}}  # fmt: skip


def _reasons(
    world: Any,
    required_profile: str = "quick",
    required_toolkit: dict[str, str] | None = None,
    **overrides: Any,
) -> list[str]:
    img = world.validated(
        receipt_overrides={"profile": "quick", "coverage": dict(COMPLETE), **overrides}
    )
    with world.catalog.transaction() as s:
        from imagectl.catalog import repository as repo

        row = repo.get_image(s, img.id)
        return check_gate(
            s,
            row,
            stack_digest=world.stack.digest,
            max_age_hours=24,
            required_profile=required_profile,
            required_toolkit=required_toolkit,
        )


def _future(seconds: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)).isoformat()


CASES = [
    ({"profile": "boot"}, "ran profile boot, weaker than the stack's validation.profile quick"),
    (
        {"coverage": {**COMPLETE, "not_run": {"cuda.gemm.bf16": "skipped: torch missing"}}},
        "required check cuda.gemm.bf16 did not run (skipped: torch missing)",
    ),
    (
        {"coverage": {**COMPLETE, "not_run": {"collective.all_reduce": "error: hang"}}},
        "required check collective.all_reduce did not run (error: hang)",
    ),
    ({"coverage": None}, "has no coverage record"),
    ({"mode": "replay", "snapshot": "h100.json"}, "is a replay of a recorded snapshot (h100.json)"),
    ({"finished_at": _future(2 * 3600)}, "in the future (clock skew allows 300 s)"),
]


@pytest.mark.parametrize(("overrides", "why"), CASES, ids=[c[1][:30] for c in CASES])
def test_gate_refuses_receipts_that_prove_nothing(world, overrides, why) -> None:
    reasons = _reasons(world, **overrides)
    assert any(why in r for r in reasons), reasons


@pytest.mark.postgres
@pytest.mark.parametrize(("overrides", "why"), CASES, ids=[c[1][:30] for c in CASES])
def test_gate_refuses_on_postgres(world_pg, overrides, why) -> None:
    reasons = _reasons(world_pg, **overrides)
    assert any(why in r for r in reasons), reasons


def test_gate_accepts_what_proves_the_image(world) -> None:
    assert _reasons(world) == []
    assert _reasons(world, profile="full") == []  # stronger than asked is fine
    assert _reasons(world, finished_at=_future(60)) == []  # within the clock skew
    assert _reasons(world, required_profile="boot", profile="boot", coverage=None) == []


def test_sandbox_replay_passes_and_is_recorded(world) -> None:
    """The docs' try-it paths (sandbox.md): a replay made with --sandbox promotes, and says so."""
    img = world.validated(
        receipt_overrides={
            "mode": "replay",
            "sandbox": True,
            "snapshot": "tests/snapshots/healthy/h100-sxm-8x.json",
        }
    )
    with world.catalog.transaction() as s:
        from imagectl.catalog import repository as repo

        assert sandbox_receipts(s, repo.get_image(s, img.id)) == ["qemu-tcg on vm-1"]
    result = promote(world.catalog, world.provider(), world.stack, img.id)
    assert result.state == "promoted"
    (gate,) = world.events("promotion.gate", image=img.id)
    assert gate.details["sandbox"] == ["qemu-tcg on vm-1"]
    assert "sandbox replay receipts" in gate.message


def test_replay_without_the_switch_never_promotes(world) -> None:
    img = world.validated(receipt_overrides={"mode": "replay"})
    with pytest.raises(GateRefused, match="is a replay of a recorded snapshot") as info:
        promote(world.catalog, world.provider(), world.stack, img.id)
    assert info.value.exit_code == 1


def test_status_says_which_images_stand_on_sandbox_replays(world) -> None:
    live = world.validated()
    sandbox = world.validated(receipt_overrides={"mode": "replay", "sandbox": True})
    out = world.run_cli("status", "--json")
    assert out.returncode == 0, out.stderr
    (entry,) = json.loads(out.stdout)["stacks"]
    by = {c["id"]: c["validated_by"] for c in entry["candidates"]}
    assert by == {live.id: "live", sandbox.id: "sandbox replay"}
    table = world.run_cli("status")
    assert "validated (sandbox replay)" in flat(table.stdout)


def _gate(world: Any, img: Any, required_shapes: list[str] | None) -> list[str]:
    from imagectl.catalog import repository as repo

    with world.catalog.transaction() as s:
        return check_gate(s, repo.get_image(s, img.id), stack_digest=world.stack.digest,
                          max_age_hours=24, required_shapes=required_shapes)  # fmt: skip


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_gate_refuses_an_image_validated_on_one_of_its_shapes(request, db) -> None:
    """A stack naming an L4 and an A10G shape (inference-l4-a10g on AWS) is not promoted
    to A10G fleets after passing on L4 hosts only: every shape the stack validates on
    needs its own passing receipt. On SQLite and on PostgreSQL."""
    world = request.getfixturevalue("world" if db == "sqlite" else "world_pg")
    img = world.validated()  # one receipt, recorded under qemu-tcg
    assert _gate(world, img, ["qemu-tcg"]) == []
    reasons = _gate(world, img, ["qemu-tcg", "g5.xlarge"])
    assert reasons == [
        "no receipt for validation shape g5.xlarge: the stack validates on qemu-tcg, "
        "g5.xlarge; validate it there too (`imagectl validate-image IMAGE --cloud CLOUD` "
        "without --shape validates every shape)"
    ]


def test_gate_refuses_a_receipt_under_a_shape_the_stack_does_not_name(world) -> None:
    from imagectl.catalog import repository as repo

    img = world.validated()
    with world.catalog.transaction() as s:
        row = repo.get_image(s, img.id)
        body = repo.latest_receipts(s, row)[0].body
        repo.record_receipt(s, row, shape="p5.48xlarge", host="vm-2", receipt=body)
    reasons = _gate(world, img, ["qemu-tcg"])
    assert len(reasons) == 1 and "(p5.48xlarge on vm-2) is for shape p5.48xlarge" in reasons[0]
    assert "do not name" in reasons[0]


def test_gate_refuses_a_receipt_recorded_under_another_shape_than_it_was_made_for(
    world,
) -> None:
    """The receipt's own expectations name the shape its checks were judged against; a
    receipt made for g6.xlarge (L4) recorded as qemu-tcg's proves nothing for qemu-tcg."""
    img = world.validated(receipt_overrides={"expectations": {"shape": "g6.xlarge"}})
    reasons = _gate(world, img, ["qemu-tcg"])
    assert any("was made for shape g6.xlarge, not qemu-tcg" in r for r in reasons), reasons


def test_promote_applies_the_stacks_validation_shapes(world) -> None:
    """Through promote() with the local stack (validation_shapes [qemu-tcg]): a receipt
    recorded only under another shape is refused even though it passes."""
    from imagectl.catalog import repository as repo

    img = world.validated()
    with world.catalog.transaction() as s:
        row = repo.get_image(s, img.id)
        run = repo.latest_receipts(s, row)[0]
        run.shape = "g5.xlarge"  # the only receipt, now under a shape the stack lacks
    with pytest.raises(GateRefused) as refused:
        promote(world.catalog, world.provider(), world.stack, img.id)
    text = "; ".join(refused.value.reasons)
    assert "no receipt for validation shape qemu-tcg" in text
    assert "is for shape g5.xlarge" in text


PIN = {"torch": "2.9.1", "cuda": "12.8"}


def _ran_on(source: str, version: str, cuda: str | None) -> dict[str, Any]:
    toolkit = {"installed": True, "version": version, "cuda": cuda, "source": source}
    return {**COMPLETE, "device": "cuda", "toolkit": toolkit}


def test_a_receipt_on_the_hosts_own_toolkit_is_refused_where_the_stack_pins_another(world):
    """``validate --toolkit host`` (a host you already run): that receipt stands
    for the host. Where the stack pins another toolkit the gate refuses it, naming both."""
    host = _ran_on("host", "2.11.0+cu130", "13.0")
    reasons = _reasons(world, required_toolkit=PIN, coverage=host)
    assert any(
        "host's own toolkit (validate --toolkit host: torch 2.11.0+cu130, CUDA 13.0)" in r
        and "pinned torch 2.9.1 (CUDA 12.8)" in r
        for r in reasons
    ), reasons
    # another CUDA build of the pinned release is another toolkit too
    other_cuda = _ran_on("host", "2.9.1+cu126", "12.6")
    assert _reasons(world, required_toolkit=PIN, coverage=other_cuda), "cu126 is not cu128"
    # the host's toolkit that is the pinned one, or no pin at all: accepted
    assert (
        _reasons(world, required_toolkit=PIN, coverage=_ran_on("host", "2.9.1+cu128", "12.8")) == []
    )
    assert _reasons(world, coverage=host) == []
    # the stack's own toolkit (shipped wheelhouse) is judged by the validator's pin check
    assert (
        _reasons(world, required_toolkit=PIN, coverage=_ran_on("wheelhouse", "2.9.1+cu128", "12.8"))
        == []
    )
