"""``imagectl deprecate IMAGE | --stack S``: deprecate one image (every region), or apply
the stack's retention (keep the last ``retention.keep_last`` promoted images, or
``--keep K``). Nothing a pointer or a running instance still uses is deprecated: for
IMAGE that is an error (exit 1); for retention it is skipped and listed. ``--delete``
deletes a deprecated / rolled-back / blocked IMAGE with the same protection."""

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
from imagectl.cli.completion import complete_images
from imagectl.core.errors import UserError
from imagectl.core.safetext import cell


@click.command("deprecate")
@click.argument("image", required=False, shell_complete=complete_images)
@stack_option("Apply the retention policy of this stack.")
@cloud_option("Cloud (default: the image's or the stack's only cloud).")
@click.option("--keep", type=click.IntRange(1, 1000), help="Override retention.keep_last.")
@click.option("--reason", default="deprecated by hand", show_default=True, help="Why.")
@click.option("--delete", is_flag=True, help="Delete IMAGE (must be deprecated already).")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    image: str | None,
    stack: str | None,
    cloud: str | None,
    keep: int | None,
    reason: str,
    delete: bool,
    as_json: bool,
) -> None:
    """Deprecate IMAGE, or the stack's promoted images beyond its retention."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import apply_retention, delete_image, deprecate_image
    from imagectl.promotion.context import choose_cloud, load_stack_for, provider_for
    from imagectl.promotion.resolve import image_to_promote

    if not image and not stack:
        raise UserError("name an IMAGE or pass --stack", hint="See `imagectl deprecate --help`")
    catalog = open_catalog()
    try:
        if image:
            _pk, stack_name, image_cloud = image_to_promote(catalog, image, stack, cloud)
            resolved = load_stack_for(workspace(ctx), stack_name)
            provider = provider_for(resolved, choose_cloud(resolved.stack, image_cloud))
            action = delete_image if delete else deprecate_image
            outcome = action(catalog, provider, _pk, reason=reason)
        else:
            assert stack is not None
            resolved = load_stack_for(workspace(ctx), stack)
            chosen = choose_cloud(resolved.stack, cloud)
            outcome = apply_retention(
                catalog,
                provider_for(resolved, chosen),
                stack,
                chosen,
                keep_last=keep or resolved.stack.retention.keep_last,
            )
    finally:
        catalog.close()
    if as_json:
        emit_json(
            {"deprecated": outcome.deprecated, "kept": outcome.skipped, "deleted": outcome.deleted}
        )
        return
    out = console()
    for line in outcome.deleted:
        out.print(cell(f"deleted {line}"))
    for line in outcome.deprecated:
        out.print(cell(f"deprecated {line}"))
    for line in outcome.skipped:
        out.print(cell(f"kept {line}"))
    if not (outcome.deprecated or outcome.skipped or outcome.deleted):
        out.print("nothing to deprecate")
