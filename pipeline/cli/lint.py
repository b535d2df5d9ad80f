"""imagectl lint"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from imagectl.cli.common import console, emit_json, json_option, stack_option, workspace
from imagectl.core.commandtext import say
from imagectl.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from imagectl.paths import Workspace


@click.command("lint")
@stack_option("Only this stack (repeatable).", dest="stacks", multiple=True)
@click.option(
    "--as-of",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Judge branch lifecycles as of this date (default: today).",
)
@json_option
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write JUnit XML here (a test case per stack), for CI.",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    as_of: dt.datetime | None,
    as_json: bool,
    junit: Path | None,
) -> None:
    """Check every stack: schema, compatibility rules, shapes and template variables.

    Exits 0 only when every stack passes (warnings are reported, not fatal), 1 when a
    stack breaks a rule, 2 when a stack file is malformed (schema errors).
    """
    from imagectl.lint import lint_workspace

    ws = workspace(ctx)
    if ws.bundled:
        _say_no_workspace(ws)
    reports = lint_workspace(ws, list(stacks) or None, as_of=as_of.date() if as_of else None)
    ok = all(r.ok for r in reports)
    if junit is not None:
        from imagectl import junit as junit_xml

        junit_xml.write(junit, junit_xml.lint_junit(reports))
    if as_json:
        emit_json(
            {
                "ok": ok,
                "workspace": {"root": str(ws.root), "bundled": ws.bundled},
                "stacks": [r.as_dict() for r in reports],
            }
        )
    else:
        out = console()
        for r in reports:
            mark = "[green]ok[/]" if r.ok else "[red]FAIL[/]"
            digest = f" [dim]{r.digest[:12]}[/]" if r.digest else ""
            out.print(f"{mark} {r.stack}{digest}  [dim]{r.path}[/]")
            for p in r.problems:
                colour = "red" if p.severity == "error" else "yellow"
                out.print(
                    f"   [{colour}]{p.severity}[/] [bold]{p.rule}[/] {p.where}: {p.message}",
                    markup=True,
                    highlight=False,
                )
                if p.fix:
                    say(out, p.fix, prefix="      fix: ", indent=" " * 11)
                if p.source:
                    out.print(f"      source: {p.source}", markup=False, style="dim")
        n_err = sum(1 for r in reports for p in r.problems if p.severity == "error")
        n_warn = sum(1 for r in reports for p in r.problems if p.severity == "warning")
        out.print(f"{len(reports)} stacks, {n_err} errors, {n_warn} warnings")
    malformed = any(p.rule == "SCHEMA" for r in reports for p in r.problems)
    sys.exit(EXIT_BAD_INPUT if malformed else EXIT_OK if ok else EXIT_FAILED)


def _say_no_workspace(ws: Workspace) -> None:
    """Outside a checkout, what is linted is the installed package's own stacks: say so
    (stderr, so that --json stays one document)."""
    import os

    from imagectl import __version__

    console(stderr=True).print(
        f"note: no workspace here (no images/stacks in {os.getcwd()} or a folder above it, "
        "no --root or IMAGECTL_ROOT): linting the stacks bundled with the installed "
        f"imagectl {__version__} ({ws.images}), not yours. Run it from your checkout, or "
        "name it: `imagectl lint --root DIR` (--root goes before or after the command).",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
