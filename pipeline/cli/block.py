"""``imagectl block IMAGE --reason "..."``: the image can never be promoted without
``--force``. Exit 0 when blocked (or already), 2 for an unknown image or a state that
cannot be blocked (a promoted image: roll it back first)."""

from __future__ import annotations

import click

from imagectl.cli.common import cloud_option, console, emit_json, json_option


@click.command("block")
@click.argument("image")
@click.option("--reason", required=True, help="Why (recorded and shown by the gate).")
@cloud_option("Cloud, when the image id exists on several.")
@json_option
def command(image: str, reason: str, cloud: str | None, as_json: bool) -> None:
    """Block IMAGE (catalog id or cloud id) from promotion."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import block_image

    catalog = open_catalog()
    try:
        img = block_image(catalog, image, reason=reason, cloud=cloud)
        label, state, why = img.label, img.state, img.blocked_reason
    finally:
        catalog.close()
    if as_json:
        emit_json({"image": label, "state": state, "reason": why})
        return
    console().print(f"[red]blocked[/] {label}: {why}")
