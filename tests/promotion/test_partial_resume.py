"""A partially promoted image: ``promote --regions`` on its resume retries only the regions
named (the others stay as they were, not copied again), and ``imagectl status`` shows the
image with the regions its promotion reached and the ones it did not."""

from __future__ import annotations

import json

from imagectl.promotion import promote
from tests.support import flat

REGIONS = ["local-a", "local-b", "local-c"]


def _copy_requests(world, region: str) -> int:
    return sum(
        1 for e in world.events("promotion.region.copy_requested") if e.details["region"] == region
    )


def _partial(world):
    img = world.validated()
    broken = world.provider(fail={"local-b": "replica", "local-c": "replica"})
    first = promote(world.catalog, broken, world.stack, img.id)
    assert first.state == "partially_promoted"
    assert [r for r, o in first.regions.items() if o.state == "done"] == ["local-a"]
    return img


def test_resume_with_regions_retries_only_those(world) -> None:
    img = _partial(world)
    assert _copy_requests(world, "local-b") == _copy_requests(world, "local-c") == 1

    second = promote(world.catalog, world.provider(), world.stack, img.id, regions=["local-b"])

    assert _copy_requests(world, "local-b") == 2  # retried, with a new copy
    assert _copy_requests(world, "local-c") == 1  # not named: not touched
    assert second.state == "partially_promoted" and second.exit_code == 1
    assert second.regions["local-b"].state == "done"
    assert second.regions["local-a"].state == "done" and second.regions["local-a"].resumed
    assert second.regions["local-c"].state == "not_attempted"
    assert "--regions" in (second.regions["local-c"].error or "")
    assert not world.region_files("local-c")
    # what is left to do is named exactly
    assert second.resume_command == (
        f"imagectl promote {img.cloud_image_id} --stack local --cloud local --regions local-c"
    )
    assert world.image(img.id).state == "partially_promoted"

    third = promote(world.catalog, world.provider(), world.stack, img.id)
    assert third.state == "promoted"
    assert _copy_requests(world, "local-b") == 2 and _copy_requests(world, "local-c") == 2
    assert world.provider().get_pointer("local", "local-c") == img.cloud_image_id


def test_status_shows_a_partially_promoted_image_with_its_regions(world) -> None:
    img = _partial(world)

    proc = world.run_cli("status", "--json")
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)["stacks"]
    (partial,) = entry["partial"]
    assert partial["cloud_image_id"] == img.cloud_image_id
    assert partial["state"] == "partially_promoted"
    assert partial["regions_reached"] == ["local-a"]
    assert partial["regions_missing"] == ["local-b", "local-c"]
    assert partial["resume"] == (
        f"imagectl promote {img.cloud_image_id} --stack local --cloud local"
    )

    table = world.run_cli("status")
    assert table.returncode == 0, table.stderr
    text = table.stdout
    assert "partially promoted" in flat(text)
    assert img.cloud_image_id[:20] in text
    line = next(ln for ln in text.splitlines() if "local-b" in ln and "local-a" in ln)
    assert "local-c" in line
