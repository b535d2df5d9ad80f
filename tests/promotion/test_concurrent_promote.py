"""Two promotions of the same stack at the same time: one fails clearly or waits; never
both at once."""

from __future__ import annotations

from imagectl.catalog.models import Promotion

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
