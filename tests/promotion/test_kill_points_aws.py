"""The kill points against AWS (a moto server): SIGKILL the real ``imagectl promote`` while
copies are recorded or pointers move, re-run, and count AMIs per region and SSM writes."""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from imagectl.catalog import repository as repo

KILLS = ["after_copy_call:2", "after_region_done:1", "after_pointer_set:2"]


@pytest.mark.parametrize("kill", KILLS)
def test_aws_kill_and_rerun(world, cloud_aws, kill: str) -> None:
    env = cloud_aws
    img = env.seed()
    args = ("promote", img.cloud_image_id, "--stack", "h100-training", "--cloud", "aws")
    crashed = world.run_cli(*args, timeout=300, IMAGECTL_TEST_CRASH_AT=kill, **env.env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    rerun = world.run_cli(*args, timeout=300, **env.env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    provider = env.provider()
    with world.catalog.transaction() as s:
        pointers = {
            p.region: p.image.cloud_image_id
            for p in repo.list_pointers(s, stack="h100-training", cloud="aws")
        }
        assert repo.get_image(s, img.id).state == "promoted"
    assert set(pointers) == set(env.regions)
    for region in env.regions:
        assert env.count_copies(img.cloud_image_id, region) == 1  # no duplicate AMI copies
        assert provider.get_pointer("h100-training", region) == pointers[region]  # SSM
    assert pointers["us-east-1"] == img.cloud_image_id
    sets = Counter(e.details["region"] for e in world.events("pointer.set"))
    assert sets == Counter(env.regions)
    assert len(world.events("promotion.pointer.flipped")) == 1
