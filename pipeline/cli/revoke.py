"""``imagectl revoke IMAGE --reason "..."``: publish a signed revocation of the image.

A canary is moved back first (``imagectl promote --canary``; to the canary before it, or
none). A promoted image is rolled back first (every pointer back to the image before it), then
the image and its copies are blocked, and a revocation signed by
``$IMAGECTL_ATTESTATION_SIGNER`` is recorded beside the attestation: the catalog, a file
beside it and the ``imagectl:revoked`` tag. ``verify`` and ``verify-node`` refuse the
image from then on; ``imagectl verify --export-revocations`` hands the revocations to
deploy jobs. Exit 0 revoked, 2 bad input (unknown image, no signer)."""

from __future__ import annotations

import click

from imagectl.cli.block import withdrawal_options
from imagectl.cli.common import console, emit_json


@click.command("revoke")
@withdrawal_options("Why (signed into the revocation).")
def command(ctx: click.Context, image: str, reason: str, cloud: str | None, as_json: bool) -> None:
    """Revoke IMAGE's attestation (catalog id or cloud id): never used, never promoted."""
    from rich.markup import escape

    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog
    from imagectl.cli.block import canary_withdrawn, print_canary_moves
    from imagectl.promotion.revoke import revoke_image

    catalog = open_catalog()
    try:
        pk, provider, canary = canary_withdrawn(
            ctx, catalog, image, cloud, allow_replica=True, why=f"revoked: {reason}"
        )
        revoked = revoke_image(catalog, provider, pk, reason=reason)
        with catalog.transaction() as s:
            row = repo.get_image(s, pk)
            image_id = row.cloud_image_id if row is not None else revoked.image
    finally:
        catalog.close()
    if as_json:
        emit_json(
            {"image": image_id, "label": revoked.image, "revocation": revoked.digest,
             "attestation": revoked.attestation, "reason": revoked.reason,
             "rolled_back": revoked.rolled_back,
             "canary_back": {r: to for r, (_f, to) in canary.items()}}
        )  # fmt: skip
        return
    out = console()
    print_canary_moves(out, canary)
    if revoked.rolled_back:
        out.print(f"rolled back first: {escape(', '.join(revoked.rolled_back))}")
    out.print(
        f"[red]revoked[/] {escape(revoked.image)}: {escape(revoked.reason)} "
        f"(revocation {revoked.digest[:19]})"
    )
