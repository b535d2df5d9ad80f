"""``imagectl rollout``'s bad input: one paragraph naming what to do, exit 2, no
traceback (the URL unset, a window that is not a duration, a stack with no canary)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(world, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", world.db_url)
    monkeypatch.setenv("IMAGECTL_LOCAL_REGISTRY", str(world.registry))
    monkeypatch.setenv("IMAGECTL_ROOT", str(REPO))
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", "http://127.0.0.1:9")


def test_no_prometheus_url(env, cli, monkeypatch) -> None:
    monkeypatch.delenv("IMAGECTL_PROMETHEUS_URL")
    r = cli("rollout", "--stack", "local")
    assert r.code == 2 and "IMAGECTL_PROMETHEUS_URL is not set" in r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("window", ["abc", "0", "-5m", "6w"])
def test_a_window_that_is_not_a_duration(env, cli, window: str) -> None:
    r = cli("rollout", "--stack", "local", "--window", window)
    assert r.code == 2 and "is not a duration" in r.err and "30m, 6h, 1d" in r.err


def test_a_stack_without_a_canary(env, cli) -> None:
    r = cli("rollout", "--stack", "local")
    assert r.code == 2 and "has no canary on local" in r.err
    assert "imagectl promote IMAGE --stack local --cloud local --canary" in r.err


def test_an_unknown_stack(env, cli) -> None:
    r = cli("rollout", "--stack", "no-such-stack")
    assert r.code == 2 and "no-such-stack" in r.err


def test_windows() -> None:
    from imagectl.cli.rollout import parse_window

    assert [parse_window(w) for w in ("600", "30m", "6h", "1d", "45s")] == [
        600, 1800, 21600, 86400, 45,
    ]  # fmt: skip


def test_a_prometheus_that_never_answers_ends_at_the_deadline(world, env, cli, monkeypatch) -> None:
    """A server that accepts the connection and sends nothing: ``--deadline`` ends the
    command (exit 1, naming the deadline), as it ends the other long commands."""
    import socket

    from imagectl.promotion import promote
    from imagectl.rollout.canary import set_canary

    old = world.validated()
    assert promote(world.catalog, world.provider(), world.stack, old.id).exit_code == 0
    set_canary(world.catalog, world.provider(), world.stack, world.validated().id)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections wait in the backlog: accepted by the kernel, unanswered
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("IMAGECTL_DEADLINE_GRACE_S", "5")
        r = cli("rollout", "--stack", "local", "--cloud", "local", "--deadline", "2")
    assert r.code == 1, r.out + r.err
    assert "deadline of 2 s" in r.err and "Traceback" not in r.err
