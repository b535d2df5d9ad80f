"""``imagectl reap``: terminate imagectl instances whose TTL expired."""

from __future__ import annotations

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    workspace,
)
from imagectl.cloud_names import REMOTE_CLOUDS
from imagectl.safetext import cell, markup


@click.command("reap")
@cloud_option(
    "Cloud(s) to sweep (default: every cloud of every stack).",
    dest="clouds",
    multiple=True,
    choices=REMOTE_CLOUDS,
)
@stack_option(
    "Take accounts/projects/regions from these stacks (default: all).",
    dest="stacks",
    multiple=True,
)
@click.option("--dry-run", is_flag=True, help="List what would be terminated; change nothing.")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    clouds: tuple[str, ...],
    stacks: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> int:
    """Terminate every instance tagged imagectl:managed whose imagectl:expires-at passed.

    Exit 0 when everything expired was terminated (or nothing was), 1 when a
    termination or a cloud listing failed.
    """
    from imagectl.clouds.reap import sweep
    from imagectl.stacks import stack_paths

    ws = workspace(ctx)
    names = list(stacks) or [p.stem for p in stack_paths(ws.stacks_dir)]
    result = sweep(ws.images, names, clouds or REMOTE_CLOUDS, dry_run=dry_run)
    unique, errors = result.instances, result.errors
    if as_json:
        emit_json({"dry_run": dry_run, "instances": unique, "errors": errors})
    else:
        out = console()
        if not unique:
            out.print("no expired imagectl instances")
        for r in unique:
            out.print(  # the cloud's words (ids, tags, errors), printed literally
                cell(
                    f"{r['action']:16} {r['cloud']:5} {r['instance_id']} ({r['location']}, "
                    f"stack {r['stack']}, expired {r['expires_at']}) {r['error']}"
                )
            )
        for e in errors:
            out.print(f"[red]error[/] {markup(e)}")
    return 1 if result.failed else 0
