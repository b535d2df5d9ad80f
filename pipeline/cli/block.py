"""``imagectl block IMAGE --reason "..."``: the image can never be promoted without
``--force``. A canary is moved back first (to the canary before it, or none). A promoted
image is revoked (``imagectl revoke``): rolled back first, a
signed revocation published, and not even ``--force`` promotes it again. Exit 0 when
blocked (or already), 2 for an unknown image, a state that cannot be blocked, or a
promoted image with no signer for its revocation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from imagectl.cli.common import F, cloud_option, console, emit_json, json_option, workspace
from imagectl.cli.completion import complete_images
from imagectl.core.safetext import markup

if TYPE_CHECKING:
    from rich.console import Console

    from imagectl.catalog.db import Catalog
    from imagectl.clouds.base import Provider

CanaryMoves = dict[str, tuple[str | None, str | None]]  # region -> (from, to)


def withdrawal_options(reason_help: str) -> Callable[[F], F]:
    """What ``block`` and ``revoke`` take: IMAGE, ``--reason`` (required), ``--cloud`` and
    ``--json`` (and the click context)."""
    decorators = (
        click.argument("image", shell_complete=complete_images),
        click.option("--reason", required=True, help=reason_help),
        cloud_option("Cloud, when the image id exists on several."),
        json_option,
        click.pass_context,
    )

    def wrap(func: F) -> F:
        for decorate in reversed(decorators):
            func = decorate(func)
        return func

    return wrap


def print_canary_moves(out: Console, canary: CanaryMoves) -> None:
    for region, (_was, to) in canary.items():
        out.print(f"canary in {markup(region)} back to {markup(to or 'none (latest)')}")


def canary_withdrawn(
    ctx: click.Context,
    catalog: Catalog,
    image: str,
    cloud: str | None,
    *,
    allow_replica: bool,
    why: str,
) -> tuple[int, Provider, CanaryMoves]:
    """``block`` and ``revoke``'s first step: IMAGE's catalog id, its stack's provider, and
    the canary moved back when it names the image (region -> (from, to))."""
    from imagectl.promotion import resolve_image
    from imagectl.promotion.context import load_stack_for, provider_for
    from imagectl.rollout.canary import withdraw_canary

    with catalog.transaction() as s:
        row = resolve_image(s, image, cloud=cloud, allow_replica=allow_replica)
        pk, stack_name, cloud_name = row.id, row.stack, row.cloud
    provider = provider_for(load_stack_for(workspace(ctx), stack_name), cloud_name)
    return pk, provider, withdraw_canary(catalog, provider, pk, reason=why)


@click.command("block")
@withdrawal_options("Why (recorded and shown by the gate).")
def command(ctx: click.Context, image: str, reason: str, cloud: str | None, as_json: bool) -> None:
    """Block IMAGE (catalog id or cloud id) from promotion."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import block_image

    catalog = open_catalog()
    try:
        _pk, provider, canary = canary_withdrawn(
            ctx, catalog, image, cloud, allow_replica=False, why=f"blocked: {reason}"
        )
        img = block_image(catalog, image, reason=reason, cloud=cloud, provider=provider)
        label, state, why = img.label, img.state, img.blocked_reason
        image_id = img.cloud_image_id
    finally:
        catalog.close()
    if as_json:
        emit_json({"image": image_id, "label": label, "state": state, "reason": why,
                   "canary_back": {r: to for r, (_f, to) in canary.items()}})  # fmt: skip
        return
    print_canary_moves(console(), canary)
    console().print(f"[red]blocked[/] {markup(label)}: {markup(why)}")
