"""``imagectl verify IMAGE``: does the image carry a valid signed attestation?

Exit 0: signed by a trusted key, for this image (a promoted copy: for its source), at
the image's stack digest, verdict pass, and the catalog's receipts are the ones signed.
Exit 1: any of these fails, or there is no attestation (each reason printed). Exit 2:
bad input (unknown image, a corrupt envelope or trust file).
``--export-envelope`` prints the envelope of a valid attestation (a deploy system places
it on nodes for ``imagectl verify-node``). ``--export-trust`` prints the configured
signer's public key as a trust file for verifiers elsewhere
(``$IMAGECTL_ATTESTATION_TRUST`` or ``--trust``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from imagectl.cli.common import cloud_option, console, emit_json, json_option, stack_option
from imagectl.errors import EXIT_FAILED, EXIT_OK, UserError


@click.command("verify")
@click.argument("image", required=False)
@stack_option("Scope a cloud image id to this stack.")
@cloud_option("Scope a cloud image id to this cloud.")
@click.option(
    "--trust",
    "trust",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Trusted public keys (JSON; default: $IMAGECTL_ATTESTATION_TRUST, else the "
    "configured signer's own key).",
)
@click.option("--export-trust", is_flag=True, help="Print the signer's public key as a trust file.")
@click.option(
    "--export-envelope",
    is_flag=True,
    help="Print the image's envelope (JSON) when it verifies, for nodes that check it "
    "at boot (`imagectl verify-node`).",
)
@json_option
def command(
    image: str | None,
    stack: str | None,
    cloud: str | None,
    trust: Path | None,
    export_trust: bool,
    export_envelope: bool,
    as_json: bool,
) -> int:
    """Check IMAGE's signed validation attestation (catalog id or cloud image id)."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import resolve_image
    from imagectl.provenance.keys import load_signer, load_trust, trust_document
    from imagectl.provenance.verify import verify_image

    if export_trust:
        click.echo(trust_document([load_signer()[1]]), nl=False)
        return EXIT_OK
    if not image:
        raise UserError("name the IMAGE to verify", hint="See `imagectl verify --help`")
    keys = load_trust(trust)
    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            result = verify_image(
                s, resolve_image(s, image, stack=stack, cloud=cloud, allow_replica=True), keys
            )
    finally:
        catalog.close()
    if export_envelope and result.valid:
        click.echo(json.dumps(result.envelope, indent=2))
    elif as_json:
        emit_json(result.to_dict())
    else:
        out = console()
        if result.valid:
            out.print(
                f"[green]valid[/]: {result.image} is attested by {result.digest}, signed by "
                f"key {str(result.keyid)[:16]}"
            )
        else:
            out.print(f"[red]not valid[/]: {result.image}")
            for reason in result.reasons:
                out.print(f"  - {reason}", soft_wrap=True)
    return EXIT_OK if result.valid else EXIT_FAILED
