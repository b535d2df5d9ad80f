"""``imagectl rollback --stack S``: every "latest" pointer back to the previous promoted
image; the current one becomes ``rolled_back``. Exit 2 when there is nothing to roll
back to; exit 1 when another promotion of the stack is running. ``--canary`` moves the
canary pointer back instead (to the canary before it, or none: canary nodes deploy from
latest); latest is untouched."""

from __future__ import annotations

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    wait_option,
    workspace,
)
from imagectl.core.safetext import cell, markup


@click.command("rollback")
@stack_option("Stack to roll back.", required=True)
@cloud_option("Cloud (default: the stack's only cloud).")
@click.option("--reason", help="Why (recorded in the event log).")
@click.option(
    "--canary",
    is_flag=True,
    help="Move the canary pointer back instead of latest (to the canary before it, or none).",
)
@wait_option
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack: str,
    cloud: str | None,
    reason: str | None,
    canary: bool,
    wait_s: float,
    as_json: bool,
) -> None:
    """Move the stack's latest pointers back to the previous promoted image."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import rollback
    from imagectl.promotion.context import choose_cloud, load_stack_for, provider_for

    resolved = load_stack_for(workspace(ctx), stack)
    chosen = choose_cloud(resolved.stack, cloud)
    catalog = open_catalog()
    if canary:
        from imagectl.core.errors import UserError
        from imagectl.rollout.canary import canary_back

        try:
            moved = canary_back(
                catalog, provider_for(resolved, chosen), stack,
                reason=reason or "rolled back by hand (rollback --canary)", lock_wait_s=wait_s,
            )  # fmt: skip
        finally:
            catalog.close()
        if not moved:
            raise UserError(
                f"stack {stack} has no canary on {chosen}: nothing to roll back",
                hint="`imagectl status` shows the canary pointers",
            )
        if as_json:
            back = {r: {"from": a, "to": b} for r, (a, b) in moved.items()}
            emit_json({"stack": stack, "cloud": chosen, "canary": back})
            return
        for region, (old, new) in sorted(moved.items()):
            console().print(cell(f"{region}: canary {old} -> {new or 'none (latest)'}"))
        return
    try:
        result = rollback(
            catalog, provider_for(resolved, chosen), stack, reason=reason, lock_wait_s=wait_s
        )
    finally:
        catalog.close()
    if as_json:
        emit_json(result.to_dict())
        return
    out = console()
    for region, (old, new) in sorted(result.moved.items()):
        out.print(cell(f"{region}: latest {old} -> {new}"))
    out.print(f"[yellow]rolled back[/]: {markup(', '.join(result.rolled_back))}")
    for region, (old, new) in sorted(result.canary.items()):
        out.print(cell(f"{region}: canary {old} -> {new or 'none (latest)'}"))
