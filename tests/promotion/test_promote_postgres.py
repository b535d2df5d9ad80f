"""The promotion flow with the catalog on PostgreSQL: the advisory promotion lock keeps a
second promotion of the stack out, and promote / rollback record the same history."""

from __future__ import annotations

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.models import Promotion
from imagectl.promotion import promote, rollback
from tests.support import flat

pytestmark = pytest.mark.postgres
REGIONS = ["local-a", "local-b", "local-c"]


def test_promote_partial_resume_and_rollback_on_postgres(world_pg) -> None:
    w = world_pg
    old, new = w.validated(), w.validated()
    assert promote(w.catalog, w.provider(), w.stack, old.id).state == "promoted"
    partial = promote(w.catalog, w.provider(fail={"local-a": "copy"}), w.stack, new.id)
    assert partial.state == "partially_promoted"
    assert {r: w.provider().get_pointer("local", r) for r in REGIONS} == {
        r: old.cloud_image_id for r in REGIONS
    }
    assert promote(w.catalog, w.provider(), w.stack, new.id).state == "promoted"
    rollback(w.catalog, w.provider(), "local")
    with w.catalog.transaction() as s:
        assert {p.image.cloud_image_id for p in repo.list_pointers(s, stack="local")} == {
            old.cloud_image_id
        }
        assert repo.get_image(s, new.id).state == "rolled_back"


def test_concurrent_promotion_refused_on_postgres(world_pg) -> None:
    w = world_pg
    a, b = w.validated(), w.validated()
    first = w.spawn("promote", str(a.id), IMAGECTL_LOCAL_LATENCY="600")
    w.wait_for_event("promotion.region.copy_started")
    second = w.run_cli("promote", str(b.id), timeout=120)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "is already running" in flat(second.stderr)
    w.finish_copies_now()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    with w.catalog.transaction() as s:
        assert [p.state for p in s.query(Promotion).all()] == ["succeeded"]
