"""Numbers a person types are checked once: finite, inside their bounds, else exit 2 with one
paragraph naming the option (``imagectl.core.numbers``). Every numeric option of every
command is enumerated: a float is a ``Bounded`` (``click.FloatRange`` lets ``nan``
through, and ``inf`` without an upper bound), an integer has both bounds.

Before, ``--deadline inf`` and ``IMAGECTL_DEADLINE_S=inf`` ended in an OverflowError
traceback (exit 1), ``--deadline nan`` "ran past its deadline of nan s", and ``--wait``,
``--reach-timeout``, ``--max-regression-pct`` took any float."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from imagectl.cli import COMMANDS, cli
from imagectl.core.errors import UserError
from imagectl.core.numbers import Bounded


def flat(text: str) -> str:
    return " ".join(text.split())


def _commands() -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        stack = [(name, cmd)]
        while stack:
            path, c = stack.pop()
            if isinstance(c, click.Group):
                stack += [(f"{path} {n}", c.get_command(ctx, n)) for n in c.list_commands(ctx)]
            else:
                yield path, c


def _numeric() -> list[tuple[str, click.Option]]:
    found = []
    for path, cmd in _commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and isinstance(
                p.type, Bounded | click.types.FloatParamType | click.types.IntParamType
            ):
                found.append((path, p))
    return found


NUMERIC = _numeric()
IDS = [f"{path} {opt.opts[0]}" for path, opt in NUMERIC]


def test_the_enumeration_finds_the_numbers() -> None:
    names = set(IDS)
    for known in (
        "reap --deadline",
        "promote --wait",
        "validate --max-regression-pct",
        "watch --interval",
        "validate-image --reach-timeout",
        "status --events",
    ):
        assert known in names, known
    assert len(NUMERIC) > 25


@pytest.mark.parametrize(("path", "option"), NUMERIC, ids=IDS)
def test_every_number_is_bounded(path: str, option: click.Option) -> None:
    t = option.type
    if isinstance(t, click.IntRange) and not isinstance(t, click.FloatRange):
        assert t.min is not None and t.max is not None, f"{path} {option.opts[0]}: no bound"
        return
    assert isinstance(t, Bounded), f"{path} {option.opts[0]}: {t!r} lets nan/inf through"


@pytest.mark.parametrize(("path", "option"), NUMERIC, ids=IDS)
def test_every_number_refuses_what_is_not_finite_or_out_of_bounds(
    path: str, option: click.Option
) -> None:
    ctx = click.Context(click.Command(path))
    t = option.type
    high = t.high if isinstance(t, Bounded) else t.max  # type: ignore[attr-defined]
    for bad in ("nan", "inf", "-inf", "1e400", str(high * 10 + 1), "-1e9", "ten"):
        with pytest.raises((UserError, click.BadParameter)) as caught:
            option.type_cast_value(ctx, bad)
        if isinstance(caught.value, UserError):
            message = caught.value.render()
            assert option.opts[0] in message and "\n" not in message, message


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e12"])
def test_a_deadline_that_is_not_a_number_of_seconds_is_exit_2(cli, value: str) -> None:
    r = cli("reap", "--deadline", value)
    assert r.code == 2, r.err
    assert f"--deadline '{value}' is not a number of seconds from 0 to 604800" in flat(r.err)
    assert "Traceback" not in r.err and r.out == ""


@pytest.mark.parametrize("value", ["inf", "nan", "-5"])
def test_the_deadline_from_the_environment_is_checked_too(cli, monkeypatch, value: str) -> None:
    monkeypatch.setenv("IMAGECTL_DEADLINE_S", value)
    r = cli("reap")
    assert r.code == 2, r.err
    assert f"$IMAGECTL_DEADLINE_S '{value}' is not a number of seconds" in flat(r.err)
    assert "Traceback" not in r.err


@pytest.mark.parametrize("value", ["0", "91d", "99999999999999999999d", "-1h"])
def test_a_rollout_window_is_bounded(value: str) -> None:
    from imagectl.cli.rollout import parse_window

    with pytest.raises(UserError, match="is not a duration from 1 s to 90 d"):
        parse_window(value)
    assert parse_window("90d") == 90 * 86400 and parse_window("30m") == 1800
