"""Every hint can be run as written: each command a fix or hint text names parses with the
real ``imagectl`` click command line, its options in the positions the text puts them
(collection and parsing: ``tests/cli/hints.py``)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from tests.cli.hints import (
    COMMANDS_NAMED,
    REPO,
    TEXTS,
    fill,
    parse,
    unquoted_mentions,
)


def test_the_collection_finds_the_hints() -> None:
    hints = [t for t in TEXTS if t.hint]
    assert len(hints) > 150, len(hints)
    assert len({c for c, _ in COMMANDS_NAMED}) > 25
    # known ones are really found
    assert any("imagectl lint" in c for c, _ in COMMANDS_NAMED)
    assert any(w.startswith("images/compat/placeholders.yaml") for t in hints for w in [t.where])


@pytest.mark.parametrize(("command", "where"), COMMANDS_NAMED, ids=[w for _, w in COMMANDS_NAMED])
def test_each_command_a_text_names_parses(command: str, where: str) -> None:
    try:
        argv = fill(command)
    except KeyError as exc:
        pytest.fail(f"{where}: `{command}`: placeholder of no known kind: {exc}")
    try:
        parse(argv)
    except click.exceptions.Exit:
        pass  # --help: a runnable command
    except click.ClickException as exc:
        pytest.fail(f"{where}: `{command}` does not parse: {exc.format_message()}")


def test_hint_texts_put_each_command_in_backticks() -> None:
    offenders = [
        f"{t.where}: {m!r} in {t.text!r}"
        for t in TEXTS
        if t.hint
        for m in unquoted_mentions(t.text)
    ]
    assert offenders == []


def test_the_parser_refuses_what_the_cli_refuses() -> None:
    """The check can fail: an option after the wrong command, an unknown command, a missing
    argument, a bad choice."""
    for bad in (
        ["lint", "--no-such-option"],
        ["promote", "--stack", "h100-training", "--cloud", "nowhere"],
        ["no-such-command"],
        ["compat", "check", "--bogus"],
    ):
        with pytest.raises(click.ClickException):
            parse(bad)
    parse(["--root", str(REPO), "lint"])
    parse(["compat", "check", "--driver", "580.95.05", "--cuda", "12.8.1"])


def test_a_global_option_works_after_the_command_too() -> None:
    """`imagectl lint --root DIR` was "No such option": --root is hoisted in front."""
    from imagectl.cli import hoist_global_options

    assert hoist_global_options(["lint", "--root", "D", "--json"]) == ["--root", "D", "lint",
                                                                       "--json"]  # fmt: skip
    assert hoist_global_options(["compat", "check", "--root=D"]) == ["--root=D", "compat", "check"]
    assert hoist_global_options(["--root", "D", "lint"]) == ["--root", "D", "lint"]
    # after --, an argument is an argument; a --root without its value is left to click
    assert hoist_global_options(["x", "--", "--root", "D"]) == ["x", "--", "--root", "D"]
    assert hoist_global_options(["lint", "--root"]) == ["lint", "--root"]
    parse(["lint", "--root", str(REPO)])
    parse(["compat", "check", "--driver", "580.95.05", "--cuda", "12.8.1", "--root", str(REPO)])


def test_lint_outside_a_checkout_names_a_command_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("IMAGECTL_ROOT", raising=False)
    outside = cli("lint")
    note = " ".join(outside.err.split())
    (named,) = re.findall(r"`(imagectl lint [^`]+)`", note)
    parse(fill(named))
    assert "before or after the command" in note
    inside = cli("lint", "--root", str(REPO))  # as the note says, after the command
    assert inside.code == 0, inside.err
    assert "no workspace here" not in inside.err


def test_an_options_value_that_looks_like_root_stays_the_options() -> None:
    """`--reason --root` gives the reason "--root": only a real --root moves."""
    from imagectl.cli import cli, hoist_global_options

    ctx = click.Context(cli)
    args = ["block", "ami-0123", "--reason", "--root"]
    assert hoist_global_options(args, cli._value_options(ctx, args)) == args
    args = ["block", "ami-0123", "--reason", "why", "--root", str(REPO)]
    assert hoist_global_options(args, cli._value_options(ctx, args))[:2] == ["--root", str(REPO)]
    parse(args)
