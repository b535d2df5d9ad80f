"""Every command's ``--help`` ends with what its exit codes mean (``imagectl.cli.
exit_codes``), as the registry serves it; ``imagectl --help`` names every code a command
can end with. Before, ``rollout --help`` never said that 3 is a hold and ``imagectl
--help`` promised only 0, 1 and 2."""

from __future__ import annotations

import click

from imagectl.cli import COMMANDS, cli
from imagectl.cli.exit_codes import EXITS


def flat(text: str) -> str:
    return " ".join(text.split())


def _helps() -> dict[str, str]:
    ctx = click.Context(cli, info_name="imagectl")
    out = {}
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [("", cmd)]
        for sub, c in subs:
            full = f"{name} {sub}".strip()
            out[full] = flat(c.get_help(click.Context(c, info_name=full, parent=ctx)))
    return out


def test_every_help_says_its_exit_codes() -> None:
    helps = _helps()
    assert len(helps) > 25
    assert set(EXITS) == set(helps)  # a new command says what its exits mean
    for name, text in helps.items():
        assert "Exit codes: 0 " in text and "2 bad input" in text, name
        assert "130 interrupted" in text, name
    assert "3 hold (too little data" in helps["rollout"]


def test_the_top_help_names_every_code() -> None:
    text = flat(cli.get_help(click.Context(cli, info_name="imagectl")))
    for code in ("0 ok", "2 bad input", "3 rollout held", "130 interrupted", "--deadline"):
        assert code in text, code
