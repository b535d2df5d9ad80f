"""Every command and sub-command of imagectl's registry (``imagectl.cli.COMMANDS``), by
its full name ("promote", "catalog migrate"): what the tests that enumerate the whole
command line walk."""

from __future__ import annotations

import click

from imagectl.cli import COMMANDS


def every_command() -> list[tuple[str, click.Command]]:
    """Each command as the command line gets it: through the registry's ``get_command``,
    which adds ``--deadline`` and the help text; a module's own ``command`` lacks them
    until some earlier test in the same process had the registry load it."""
    from imagectl.cli import cli

    ctx = click.Context(cli)
    out = []
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in sorted(cmd.commands.items())]
        else:
            out.append((name, cmd))
    return out
