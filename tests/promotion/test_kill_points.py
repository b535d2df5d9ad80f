"""Kill the real ``imagectl promote`` process with SIGKILL at each recorded step, re-run it,
and check: no duplicate copies, no lost records, the pointer flipped exactly once."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.models import Promotion
from imagectl.crashpoints import POINTS
from tests.support import flat

REGIONS = ["local-a", "local-b", "local-c"]
# local-a finishes first, so "after_region_done:1" kills while b and c are still copying
LATENCY = "local-a=0.05,local-b=0.6,local-c=0.6"

KILLS = [
    "after_copy_requested:2",
    "after_copy_call:2",
    "after_copy_started:2",
    "after_region_done:1",
    "before_pointer_flip",
    "after_pointer_set:2",
    "before_finish",
]


def test_every_kill_point_is_covered() -> None:
    # inside_family_member is Google Cloud's (test_kill_points_clouds.py)
    assert sorted(k.split(":")[0] for k in KILLS) == sorted(
        p for p in POINTS if p != "inside_family_member"
    )


@pytest.mark.parametrize("kill", KILLS)
def test_kill_and_rerun_completes_exactly_once(world, kill: str) -> None:
    img = world.validated()
    crashed = world.run_cli(
        "promote",
        img.cloud_image_id,
        "--stack",
        "local",
        IMAGECTL_TEST_CRASH_AT=kill,
        IMAGECTL_LOCAL_LATENCY=LATENCY,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert world.image(img.id).state == "promoting"
    if kill.startswith(("after_copy", "after_region")):
        provider = world.provider()
        assert all(provider.get_pointer("local", r) is None for r in REGIONS)

    rerun = world.run_cli(
        "promote", img.cloud_image_id, "--stack", "local", IMAGECTL_LOCAL_LATENCY=LATENCY
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "promoted" in flat(rerun.stdout)

    provider = world.provider()
    assert {r: provider.get_pointer("local", r) for r in REGIONS} == {
        r: img.cloud_image_id for r in REGIONS
    }
    for region in REGIONS:  # no duplicate copies: one file and one copy request per region
        assert len(world.region_files(region)) == 1
        assert len(list((world.registry / region / "copies").glob("*.json"))) == 1
    requested = Counter(
        e.details["region"] for e in world.events("promotion.region.copy_requested")
    )
    assert requested == Counter(REGIONS)  # the token recorded before the kill was reused
    done = Counter(e.details["region"] for e in world.events("promotion.region.done"))
    assert done == Counter(REGIONS)
    assert len(world.events("promotion.pointer.flipped")) == 1
    pointer_sets = Counter(e.details["region"] for e in world.events("pointer.set"))
    assert pointer_sets == Counter(REGIONS)  # each region's pointer moved exactly once
    assert len(world.events("promotion.resumed")) == 1
    assert world.events("lock.broken"), "the dead run's lock was not taken over"
    with world.catalog.transaction() as s:
        (promo,) = s.query(Promotion).all()
        assert promo.state == "succeeded" and promo.completed_regions == REGIONS
        rows = repo.list_images(s, stack="local")
        assert sorted((r.region, r.state) for r in rows) == sorted(
            [("build", "promoted")] + [(r, "promoted") for r in REGIONS]
        )
