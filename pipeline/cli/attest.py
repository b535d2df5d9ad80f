"""``imagectl attest IMAGE``: sign a validated image's attestation again.

A validation that decides ``validated`` signs one itself; this command is for when that
signing failed (a KMS outage) or the signing key was rotated. It signs what the catalog's
newest receipts say, with ``$IMAGECTL_ATTESTATION_SIGNER`` (default: the state folder's
key), records it and tags the image."""

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


@click.command("attest")
@click.argument("image")
@stack_option("Scope a cloud image id to this stack.")
@cloud_option("Scope a cloud image id to this cloud.")
@json_option
@click.pass_context
def command(
    ctx: click.Context, image: str, stack: str | None, cloud: str | None, as_json: bool
) -> None:
    """Sign and record IMAGE's validation attestation (catalog id or cloud image id)."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import resolve_image
    from imagectl.promotion.context import load_stack_for, provider_for
    from imagectl.provenance.attest import attest_image

    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            img = resolve_image(s, image, stack=stack, cloud=cloud)
            pk, stack_name, cloud_name = img.id, img.stack, img.cloud
        provider = provider_for(load_stack_for(workspace(ctx), stack_name), cloud_name)
        attested = attest_image(catalog, pk, provider)
    finally:
        catalog.close()
    if as_json:
        emit_json(
            {"image": pk, "digest": attested.digest, "keyid": attested.keyid,
             "file": str(attested.path)}
        )  # fmt: skip
        return
    console().print(
        f"attested: {attested.digest} signed by key {attested.keyid[:16]} ({attested.path})"
    )
