"""``imagectl verify-node``: on a fleet node, is the booted image attested?

Run by the boot unit before validation when the image was built with
``validator_require_attestation`` (playbooks/roles/validator): exit 0 when the envelope is
signed by a key of the image's trust file, for this image's manifest, with verdict pass;
exit 1 (the unit fails, the node is not ready) otherwise; exit 2 when a file is missing
or unreadable. Uses only the validator's own package (``validators.attestation``)."""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.cli.common import console, emit_json, json_option
from imagectl.errors import EXIT_FAILED, EXIT_OK, UserError
from imagectl.validators.attestation import BadAttestationInput, verify_node


@click.command("verify-node")
@click.option(
    "--envelope",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("/etc/imagectl/attestation.dsse.json"),
    show_default=True,
    help="The image's attestation (DSSE envelope), placed by the deploy system.",
)
@click.option(
    "--trust",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("/etc/imagectl/attestation-trust.json"),
    show_default=True,
    help="The public keys trusted to sign (written into the image at build time).",
)
@click.option(
    "--manifest",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("/etc/imagectl/manifest.json"),
    show_default=True,
    help="This image's manifest: its sha256 must be the attested one.",
)
@json_option
def command(envelope: Path, trust: Path, manifest: Path, as_json: bool) -> int:
    """Refuse (exit 1) unless this node's image carries a valid signed attestation."""
    try:
        reasons = verify_node(envelope, trust, manifest)
    except BadAttestationInput as exc:
        raise UserError(
            str(exc),
            hint="Place the image's attestation on the node (`imagectl verify IMAGE "
            "--export-envelope`), or build without validator_require_attestation",
        ) from None
    if as_json:
        emit_json({"valid": not reasons, "reasons": reasons, "envelope": str(envelope)})
    elif reasons:
        out = console()
        out.print("[red]not attested[/]: this node's image fails its attestation")
        for reason in reasons:
            out.print(f"  - {reason}", soft_wrap=True)
    else:
        console().print(f"[green]attested[/]: {envelope} holds for {manifest}")
    return EXIT_OK if not reasons else EXIT_FAILED
