"""``imagectl promote IMAGE | --stack S``: gated, parallel promotion to every region.

``--canary`` moves the stack's canary pointer instead of "latest" (the same gate; no
copies: where the image already is; ``imagectl rollout`` decides the rest).

Exit codes: 0 promoted (or already promoted); 1 gate refused, image blocked, another
promotion of the stack running, or partially promoted (the output says how to resume);
2 bad input (unknown image or stack, corrupt receipt, region not in the stack).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from imagectl.catalog.lifecycle import ImageState
from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    wait_option,
    workspace,
)
from imagectl.cli.completion import complete_images
from imagectl.core.commandtext import command_line
from imagectl.core.errors import UserError
from imagectl.core.safetext import cell, cells, markup

if TYPE_CHECKING:
    from rich.console import Console

    from imagectl.promotion.results import PromotionResult


def render(out: Console, result: PromotionResult) -> None:
    from rich.table import Table

    if result.state == "dry_run":
        out.print(cell(f"dry run: would promote {result.image_id} ({result.stack} on "
                       f"{result.cloud})"))  # fmt: skip
        for region, prev in result.previous_pointers.items():
            out.print(cell(f"  {region}: latest {prev or '(none)'} -> {result.image_id} "
                           "(after copy)"))  # fmt: skip
        if result.overridden:
            out.print(cell(f"  gate overridden by --force: {'; '.join(result.overridden)}"))
        return
    if result.state == "already_promoted":
        out.print(cell(f"{result.image_id} is already promoted ({result.stack} on {result.cloud})"))
    else:
        table = Table(
            title=cell(f"promotion {result.promotion_id}: {result.image_id}"), title_justify="left"
        )
        for col in ("region", "state", "replica", "seconds", "error"):
            table.add_column(col)
        for r in result.regions.values():
            table.add_row(  # the cloud's words (ids, errors), printed literally
                *cells(
                    r.region,
                    r.state + (" (earlier run)" if r.resumed else ""),
                    r.replica_id or "-",
                    f"{r.seconds:.1f}",
                    r.error or "",
                ),
                style="red" if r.state == "failed" else "",
            )
        out.print(table)
    if result.forced:
        out.print(
            f"[yellow]forced[/]: overrode {markup('; '.join(result.overridden) or 'nothing')}"
        )
    for line in result.deprecated:
        out.print(cell(f"retention: deprecated {line}"))
    for line in result.retention_skipped:
        out.print(cell(f"retention: kept {line}"))
    if result.state == ImageState.PROMOTED:
        out.print(
            f"[green]promoted[/] {markup(result.image_id)}: latest of {markup(result.stack)} on "
            f"{result.cloud} flipped in {len(result.regions)} region(s) "
            f"in {result.seconds:.1f} s"
        )
    elif result.state in ("partially_promoted", "failed"):
        failed = [r.region for r in result.regions.values() if r.state == "failed"]
        skipped = [r.region for r in result.regions.values() if r.state == "not_attempted"]
        what = [f"{', '.join(failed)} failed"] if failed else []
        what += [f"{', '.join(skipped)} not attempted (not in --regions)"] if skipped else []
        out.print(
            f"[red]{result.state}[/]: {markup('; '.join(what))}; the latest pointer is "
            "unchanged in every region."
        )
        if result.resume_command:
            command_line(out, "Fix the cause, then resume with:", result.resume_command)


WATCHER_OFF = (
    "stack {stack} leaves the passive watcher off (validation.watcher: false), so its "
    "canary nodes export no Xid or hardware findings and imagectl rollout will hold this "
    "canary (no watched node-hours) until the watcher is on: set `validation.watcher: true` "
    "in the stack (the validator role's validator_watch_enabled) and build the image again"
)


@click.command("promote")
@click.argument("image", required=False, shell_complete=complete_images)
@stack_option("Stack (default: the image's).")
@cloud_option("Cloud (default: the image's, or the stack's only cloud).")
@click.option(
    "--regions",
    help="Comma-separated subset of the stack's target regions. On the resume of a "
    "partially promoted image, only these are retried (the others wait for a later run; "
    "the pointers flip once every target region is done).",
)
@click.option("--dry-run", is_flag=True, help="Check the gate and print the plan; change nothing.")
@click.option(
    "--canary",
    is_flag=True,
    help="Point the stack's canary pointer (beside latest) at the image where it already is, "
    "after the same gate; `imagectl rollout --stack STACK` then advances or rolls it back "
    "from fleet health.",
)
@click.option("--force", is_flag=True, help="Override the gate (needs --reason; recorded).")
@click.option("--reason", help="Why the gate is overridden (with --force).")
@click.option(
    "--copy-timeout",
    "copy_timeout",
    type=click.IntRange(min=1, max=2880),
    help="Minutes to wait for each region's copy (default: the stack's "
    "clouds.<cloud>.copy_timeout_minutes, 60).",
)
@wait_option
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    image: str | None,
    stack: str | None,
    cloud: str | None,
    regions: str | None,
    dry_run: bool,
    canary: bool,
    force: bool,
    reason: str | None,
    copy_timeout: int | None,
    wait_s: float,
    as_json: bool,
) -> None:
    """Promote IMAGE (catalog id or cloud id), or the stack's newest validated image."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import promote
    from imagectl.promotion.context import choose_cloud, load_stack_for, provider_for
    from imagectl.promotion.display import RegionProgress
    from imagectl.promotion.promote import target_regions
    from imagectl.promotion.resolve import image_to_promote

    if reason and not force:
        raise UserError("--reason goes with --force", hint="Add --force, or drop --reason")
    if canary and (force or dry_run or regions or copy_timeout):
        raise UserError(
            "--canary takes no --force, --dry-run, --regions or --copy-timeout: a canary is "
            "gated, and set where the image already is",
            hint="Drop those options, or drop --canary to promote to latest",
        )
    catalog = open_catalog()
    try:
        pk, stack_name, image_cloud = image_to_promote(catalog, image, stack, cloud)
        resolved = load_stack_for(workspace(ctx), stack_name)
        chosen = choose_cloud(resolved.stack, cloud or image_cloud)
        if canary:
            from imagectl.rollout.canary import set_canary

            moved = set_canary(
                catalog, provider_for(resolved, chosen), resolved, pk, lock_wait_s=wait_s
            )
            warnings = [] if resolved.stack.validation.watcher else [WATCHER_OFF.format(
                stack=resolved.stack.name)]  # fmt: skip
            for text in warnings:
                console(stderr=True).print(
                    "[bold yellow]warning:[/] " + markup(text), soft_wrap=True
                )
            if as_json:
                emit_json({**moved.to_dict(), "warnings": warnings})
                return
            for region, (before, after) in moved.moved.items():
                console().print(cell(f"canary of {moved.stack} in {region}: {before or '(none)'}"
                                     f" -> {after}"))  # fmt: skip
            return
        wanted = [r.strip() for r in regions.split(",") if r.strip()] if regions else None
        targets = target_regions(resolved.stack, chosen, wanted)
        provider = provider_for(resolved, chosen)
        out = console(stderr=as_json)
        with RegionProgress(out, targets) as progress:
            result = promote(
                catalog,
                provider,
                resolved,
                pk,
                regions=wanted,
                force=force,
                reason=reason,
                dry_run=dry_run,
                progress=progress,
                lock_wait_s=wait_s,
                timeout_s=60.0 * copy_timeout if copy_timeout else None,
            )
    finally:
        catalog.close()
    if as_json:
        emit_json(result.to_dict())
    else:
        render(console(), result)
    sys.exit(result.exit_code)
