"""Every command and sub-command of imagectl's registry (``imagectl.cli.COMMANDS``), by
its full name ("promote", "catalog migrate"): what the tests that enumerate the whole
command line walk."""

from __future__ import annotations

import importlib

import click

from imagectl.cli import COMMANDS


def every_command() -> list[tuple[str, click.Command]]:
    out = []
    for name, (module, _) in sorted(COMMANDS.items()):
        cmd = importlib.import_module(module).command
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in sorted(cmd.commands.items())]
        else:
            out.append((name, cmd))
    return out
