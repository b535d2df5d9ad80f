"""``imagectl diff IMAGE_A IMAGE_B`` / ``imagectl diff --stack S``: what changed.

Compares the SBOM inventories of two images (catalog ids or cloud image ids), or of the
stack's newest candidate against its promoted image: pinned packages, the kernel and the
NVIDIA kernel modules first, then every other package, then the validator's Python
packages. ``--format markdown`` writes a pull-request comment. Exit 0 whatever changed
(a diff is information); exit 2 when an image is unknown or has no SBOM."""

from __future__ import annotations

import click

from imagectl.cli.common import cloud_option, emit_json, json_option, stack_option
from imagectl.cli.completion import complete_images
from imagectl.core.errors import UserError


@click.command("diff")
@click.argument("images", nargs=-1, shell_complete=complete_images)
@stack_option("Without IMAGEs: the stack's newest candidate against its promoted image.")
@cloud_option("The cloud (with --stack, or to scope cloud image ids).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    help="markdown: a pull-request comment.",
)
@json_option
def command(
    images: tuple[str, ...], stack: str | None, cloud: str | None, fmt: str, as_json: bool
) -> None:
    """Added, removed and changed packages and modules between two images."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import resolve_image
    from imagectl.provenance.diff import (
        compare_images,
        current_and_candidate,
        render_markdown,
        render_text,
    )

    if len(images) not in (0, 2) or (not images and not stack):
        raise UserError(
            "name two images (IMAGE_A IMAGE_B), or --stack for candidate against promoted",
            hint="See `imagectl diff --help`",
        )
    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            if images:
                before, after = (
                    resolve_image(s, ref, stack=stack, cloud=cloud, allow_replica=True)
                    for ref in images
                )
            else:
                assert stack is not None
                before, after = current_and_candidate(s, stack, cloud)
            result = compare_images(s, before, after)
    finally:
        catalog.close()
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(render_markdown(result) if fmt == "markdown" else render_text(result), nl=False)
