"""``imagectl reap``: terminate imagectl instances whose TTL expired, and delete the
multi-node placements they left."""

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
from imagectl.core.safetext import cell, markup
from imagectl.headline import all_clear, could_not_run


@click.command("reap")
@cloud_option(
    "Cloud(s) to sweep (default: every cloud of every stack).",
    dest="clouds",
    multiple=True,
    remote_only=True,
)
@stack_option(
    "Take accounts/projects/regions from these stacks (default: all).",
    dest="stacks",
    multiple=True,
)
@click.option(
    "--dry-run", is_flag=True, help="List what would be terminated or deleted; change nothing."
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    clouds: tuple[str, ...],
    stacks: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> int:
    """Terminate every instance tagged imagectl:managed whose imagectl:expires-at passed,
    and delete each multi-node placement imagectl made whose TTL passed and that holds no
    instance (AWS cluster placement group, GCP compact placement policy, Azure proximity
    placement group).

    Exit 0 when everything expired was terminated or deleted (or nothing was), 1 when a
    termination, a deletion or a cloud listing failed.
    """
    from imagectl.clouds.reap import sweep
    from imagectl.clouds.registry import remote_cloud_names
    from imagectl.stacks import stack_paths

    ws = workspace(ctx)
    names = list(stacks) or [p.stem for p in stack_paths(ws.stacks_dir)]
    result = sweep(ws.images, names, clouds or remote_cloud_names(), dry_run=dry_run)
    unique, placements, errors = result.instances, result.placements, result.errors
    headline = could_not_run(result.checks, result.not_run)
    if as_json:
        emit_json(
            {
                "dry_run": dry_run,
                "complete": not result.not_run,
                "checks": {"total": result.checks, "could_not_run": result.not_run},
                "headline": headline,
                "instances": unique,
                "placements": placements,
                "errors": errors,
            }
        )
    else:
        out = console()
        if headline:  # before anything that reads as an all-clear
            out.print(f"[red]{markup(headline)}[/]", highlight=False, soft_wrap=True)
        if not unique and not placements:
            out.print(all_clear("no expired imagectl instances or placements", result.not_run))
        for r in unique:
            out.print(  # the cloud's words (ids, tags, errors), printed literally
                cell(
                    f"{r['action']:16} {r['cloud']:5} {r['instance_id']} ({r['location']}, "
                    f"stack {r['stack']}, expired {r['expires_at']}) {r['error']}"
                )
            )
        for r in placements:
            out.print(
                cell(
                    f"{r['action']:16} {r['cloud']:5} placement {r['placement']} ({r['kind']}, "
                    f"{r['location']}, stack {r['stack']}, expired {r['expires_at']}) "
                    f"{r['error']}"
                )
            )
        for e in errors:
            out.print(f"[red]error[/] {markup(e)}")
    return 1 if result.failed else 0
