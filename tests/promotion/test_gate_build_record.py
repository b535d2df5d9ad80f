"""The gate and the build's expectations record: where the build recorded
what the image must contain, the record's digest is the one the image was built from, and
every host receipt was judged by exactly what the build recorded for its shape. Through
the real catalog and ``check_gate``."""

from __future__ import annotations

from typing import Any

from imagectl.catalog import repository as repo
from imagectl.promotion.gate import check_gate
from imagectl.stacks.expectations import BuildExpectations, for_build
from tests.support import REPO

COMPLETE = {"profile": "boot", "shape_kind": "single", "required": [], "ran": [], "not_run": {}}
SHAPE = "qemu-tcg"


def _record(world: Any, build_id: str) -> BuildExpectations:
    return for_build(REPO / "images", world.stack, [SHAPE], build_id=build_id)


def _validated(world: Any, judged_by: dict[str, Any]) -> Any:
    return world.validated(
        receipt_overrides={"profile": "boot", "coverage": dict(COMPLETE), "expectations": judged_by}
    )


def _set(world: Any, row: Any, record: BuildExpectations | None, digest: str | None = None) -> str:
    with world.catalog.transaction() as s:
        build = repo.get_image(s, row.id).build
        if record is None:
            build.expectations_digest, build.expectations = None, None
        else:
            build.expectations_digest, build.expectations = record.columns()
            if digest is not None:
                build.expectations_digest = digest
        return str(build.build_id)


def _gate(world: Any, row: Any) -> list[str]:
    with world.catalog.transaction() as s:
        return check_gate(
            s, repo.get_image(s, row.id), stack_digest=world.stack.digest, max_age_hours=24,
            required_profile="boot",
        )  # fmt: skip


def test_receipts_judged_by_the_record_pass(world: Any) -> None:
    record = _record(world, "b")
    row = _validated(world, record.shapes[SHAPE].model_dump(mode="json"))
    _set(world, row, record)
    assert _gate(world, row) == []
    # judged before the build's record was filled in (a reused candidate's older build):
    # the same expectations, made by the stack then, differ in where they came from only
    old = record.shapes[SHAPE].model_copy(update={"origin": "stack:local"})
    row = _validated(world, old.model_dump(mode="json"))
    _set(world, row, record)
    assert _gate(world, row) == []


def test_a_receipt_judged_by_other_expectations_is_refused(world: Any) -> None:
    """A host judged by the stack as it read later (another kernel pin) proves nothing
    about the image the build recorded."""
    record = _record(world, "b")
    other = record.shapes[SHAPE].model_copy(update={"kernel": "6.1.0-99-amd64"})
    row = _validated(world, other.model_dump(mode="json"))
    build_id = _set(world, row, record)
    reasons = _gate(world, row)
    assert any(
        f"was judged by other expectations than build {build_id} recorded for {SHAPE} (kernel)" in r
        for r in reasons
    ), reasons
    _set(world, row, None)  # the same receipt, no record (a build before 0008): not this rule
    assert not any("other expectations" in r for r in _gate(world, row))


def test_a_record_of_another_digest_is_refused(world: Any) -> None:
    record = _record(world, "b")
    row = _validated(world, record.shapes[SHAPE].model_dump(mode="json"))
    build_id = _set(world, row, record, digest="e" * 64)
    reasons = _gate(world, row)
    assert (
        f"build {build_id} recorded expectations of stack digest eeeeeeeeeeee, but the image "
        f"was built from {world.stack.digest[:12]}"
    ) in reasons
