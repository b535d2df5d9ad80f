"""Every command a hint names pastes as that command at every terminal width: each hint and
fix text (``tests/cli/hints.py`` collects them from the sources) is printed as the command
line prints it at 60, 80 and 200 columns, each command is read back from what a terminal
would show (between its backticks, on one line) and parsed with the real ``imagectl``
command line; the result must be the command the text names. Before, rich broke the line
inside a command (rich's "Soft Wrapping": a line break is inserted at a space), and
``imagectl attest --new-key --save-trust`` pasted as ``imagectl attest --new-key``."""

from __future__ import annotations

import contextlib
import re
import shlex

import click
import pytest

from imagectl.cli.common import _print_error
from imagectl.core.commandtext import command_line, say, wrap
from imagectl.core.output import console
from tests.cli.hints import REPO, TEXTS, commands_in, fill, parse

WIDTHS = (60, 80, 200)
# every text that names a command in backticks: the hints, and the messages around them
HINTS = sorted({t.text: t for t in TEXTS if "`" in t.text and commands_in(t.text)}.values(),
               key=lambda t: t.where)  # fmt: skip


def _filled(text: str) -> tuple[str, list[list[str]]]:
    """``text`` with each command's placeholders filled, and those commands' argv."""
    argvs: list[list[str]] = []

    def one(match: re.Match[str]) -> str:
        segment = match.group(1)
        if segment not in commands_in(text):
            return match.group(0)
        argv = ["imagectl", *fill(segment)]
        argvs.append(argv)
        return f"`{shlex.join(argv)}`"

    filled = re.sub(r"`([^`]+)`", one, text)
    if not argvs:  # the whole text is a command (a resume line)
        argv = ["imagectl", *fill(text.strip())]
        return shlex.join(argv), [argv]
    return filled, argvs


def _pasted(shown: str) -> list[list[str]]:
    """The commands a reader copies from ``shown``: between backticks, one line each."""
    found = []
    for segment in re.findall(r"`([^`]*)`", shown):
        assert "\n" not in segment, f"a line break inside a command: {segment!r}"
        found.append(shlex.split(segment))
    return found


def test_the_collection_has_the_hints_that_broke() -> None:
    joined = " ".join(t.text for t in HINTS)
    for known in ("imagectl attest --new-key --save-trust", "--canary`"):
        assert known in joined, known
    assert len(HINTS) > 40, len(HINTS)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_hint_pastes_as_its_command(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    broken = []
    for t in HINTS:
        try:
            text, argvs = _filled(t.text)
        except KeyError:
            continue  # test_hints names the placeholder of no known kind
        if "`" not in text:
            continue  # a whole-text command: printed by command_line (below)
        _print_error(f"something went wrong. {text}")
        shown = capsys.readouterr().err
        assert all(len(line) <= width or "`" in line for line in shown.splitlines()), shown
        try:
            pasted = _pasted(shown)
        except AssertionError as exc:
            broken.append(f"{t.where}: {exc}")
            continue
        if pasted != argvs:
            broken.append(f"{t.where}: pasted {pasted}, named {argvs}")
        for argv in pasted:
            with contextlib.suppress(click.exceptions.Exit):  # --help: runnable
                parse(argv[1:])
        capsys.readouterr()
    assert broken == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_command_line_is_one_line(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundle's install line and the promotion's resume command: one line, unbroken."""
    monkeypatch.setenv("COLUMNS", str(width))
    install = (
        "tar xf imagectl-bundle-0.1.0-py3.12.tar.gz && sh imagectl-bundle-0.1.0-py3.12/"
        "install.sh --prefix /opt/imagectl-validator --host-site-packages"
    )
    command_line(console(), "install on the host (no network needed):", install)
    resume = "imagectl promote ami-0123456789abcdef0 --stack h100-training --cloud aws"
    command_line(console(), "Fix the cause, then resume with:", resume)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"install on the host (no network needed): {install}",
        f"Fix the cause, then resume with: {resume}",
    ]
    parse(shlex.split(resume)[1:])


def test_wrap_breaks_between_words_and_keeps_commands_whole() -> None:
    text = "Run `imagectl attest --new-key --save-trust` once, then `imagectl verify IMAGE`."
    assert wrap(text, 30) == [
        "Run",
        "`imagectl attest --new-key --save-trust`",
        "once, then",
        "`imagectl verify IMAGE`.",
    ]
    assert wrap(text, 200) == [text]
    assert wrap("a\nb c", 20) == ["a", "b c"]
    assert wrap("error x y", 20, first=18) == ["error", "x y"]


def test_say_prints_inert_text_and_indents(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    say(console(), "[red]x[/] \x1b]52;c;AAAA\x07 then `imagectl lint --root DIR` please",
        prefix="   fix: ", indent="        ")  # fmt: skip
    assert capsys.readouterr().out.splitlines() == [
        "   fix: [red]x[/] then",
        "        `imagectl lint --root DIR`",
        "        please",
    ]


@pytest.mark.parametrize("width", [60, 80])
def test_validates_table_names_its_commands_whole_below_it(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check's message in the table's narrow column breaks the command it names
    (`imagectl snapshot -o FILE --load-s N`): each is printed whole below the table."""
    from imagectl.cli import main

    monkeypatch.setenv("COLUMNS", str(width))
    replay = str(REPO / "tests" / "snapshots" / "healthy" / "h200-8x.json")
    assert main(["validate", "--replay", replay, "--profile", "quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    named = [line.removeprefix("to run: ") for line in lines if line.startswith("to run: ")]
    assert "imagectl snapshot -o FILE --load-s N" in named, lines[-5:]
    for command in named:
        parse(fill(command))


@pytest.mark.parametrize("width", WIDTHS)
def test_every_help_keeps_its_commands_whole(width: int) -> None:
    """click's wrapping broke `imagectl verify-node` after its hyphen and `imagectl rollout
    --stack STACK` at a space (``imagectl.cli.helptext`` keeps backticks whole)."""
    from imagectl.cli import COMMANDS, cli

    top = click.Context(cli, info_name="imagectl", terminal_width=width, max_content_width=width)
    seen = 0
    for name in sorted(COMMANDS):
        cmd = cli.get_command(top, name)
        assert cmd is not None
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [("", cmd)]
        for sub, c in subs:
            full = f"{name} {sub}".strip()
            ctx = c.context_class(c, info_name=full, parent=top, terminal_width=width,
                                  max_content_width=width)  # fmt: skip
            for segment in re.findall(r"`([^`]*)`", c.get_help(ctx)):
                assert "\n" not in segment, f"{full} --help at {width}: {segment!r}"
                if segment.startswith("imagectl "):
                    seen += 1
                    with contextlib.suppress(click.exceptions.Exit):
                        parse(fill(segment))
    assert seen >= 5
