"""Two promotions of the same stack at the same time: one fails clearly or waits; never
both at once."""

from __future__ import annotations

import time

from imagectl.catalog.models import Promotion
from tests.support import flat

LATENCY = "0.8"


def test_second_promotion_fails_clearly(world) -> None:
    a, b = world.validated(), world.validated()
    # the first run holds the lock while its copies "take" 10 minutes
    first = world.spawn("promote", str(a.id), IMAGECTL_LOCAL_LATENCY="600")
    world.wait_for_event("promotion.region.copy_started")
    second = world.spawn("promote", str(b.id), IMAGECTL_LOCAL_LATENCY="0")
    out2, loser = second.communicate(timeout=120)
    assert second.returncode == 1, out2 + loser
    assert first.poll() is None, "the first promotion ended before the second tried"
    world.finish_copies_now()
    out1, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, out1 + err1
    assert "promotion of stack local on cloud local is already running" in loser
    assert "pid " in loser
    assert len(world.events("promotion.pointer.flipped")) == 1
    with world.catalog.transaction() as s:
        assert len(s.query(Promotion).all()) == 1


def test_second_promotion_waits_with_wait(world) -> None:
    a, b = world.validated(), world.validated()
    procs = [
        world.spawn("promote", str(img.id), "--wait", "120", IMAGECTL_LOCAL_LATENCY=LATENCY)
        for img in (a, b)
    ]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, out + err
    with world.catalog.transaction() as s:
        first, second = sorted(s.query(Promotion).all(), key=lambda p: p.started_at)
        assert first.state == second.state == "succeeded"
        assert first.finished_at is not None and first.finished_at <= second.started_at
        winner = second.image.cloud_image_id
    provider = world.provider()
    assert {provider.get_pointer("local", r) for r in ("local-a", "local-b", "local-c")} == {winner}
    assert len(world.events("promotion.pointer.flipped")) == 2


def test_rollback_waits_for_a_running_promotion_only_with_wait(world) -> None:
    """``rollback --wait S``: a rollback that meets a promotion holding the stack's lock
    waits up to S seconds for it, then rolls back; without it, it stops at once naming
    the promotion, and the pointers are left as they were."""
    a, b, c = world.validated(), world.validated(), world.validated()
    for img in (a, b):
        done = world.run_cli("promote", str(img.id), IMAGECTL_LOCAL_LATENCY="0", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    before = len(world.events("promotion.region.copy_started"))  # a's and b's
    slow = world.spawn("promote", str(c.id), IMAGECTL_LOCAL_LATENCY="600")
    deadline = time.monotonic() + 120
    while len(world.events("promotion.region.copy_started")) == before:  # c holds the lock
        assert time.monotonic() < deadline and slow.poll() is None, slow.communicate()
        time.sleep(0.05)
    refused = world.run_cli("rollback", "--stack", "local", timeout=120)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "is already running" in flat(refused.stderr)
    provider = world.provider()
    regions = ("local-a", "local-b", "local-c")
    assert {provider.get_pointer("local", r) for r in regions} == {b.cloud_image_id}
    assert not world.events("rollback.started")
    waiting = world.spawn("rollback", "--stack", "local", "--wait", "120")
    time.sleep(1)
    assert waiting.poll() is None, "the rollback did not wait for the lock"
    world.finish_copies_now()
    out, err = slow.communicate(timeout=120)
    assert slow.returncode == 0, out + err
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, out + err
    # c was promoted, then rolled back: the pointers name b again
    assert len(world.events("rollback.finished")) == 1
    assert len(world.events("promotion.pointer.flipped")) == 3  # a, b, c
    assert {provider.get_pointer("local", r) for r in regions} == {b.cloud_image_id}
