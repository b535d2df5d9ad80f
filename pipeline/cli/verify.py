"""``imagectl verify IMAGE``: does the image carry a valid signed attestation?

Exit 0: signed by a trusted key, naming this very image (a promoted copy: named by the
statement its promotion signed), at the image's stack digest, the statement whole
(verdict pass and every receipt it carries passed), the catalog's receipts the ones
signed, and no trusted revocation naming it. Exit 1: any of these fails, or there is no
attestation (each reason printed). Exit 2: bad input (unknown image, a corrupt envelope,
a missing, empty or foreign trust file).

Trusted keys: ``--trust FILE``, else ``$IMAGECTL_ATTESTATION_TRUST``, else the
repository's pinned ``keys/attestation-trust.json``. ``--envelope FILE`` verifies
offline, without a catalog (a deploy job: the envelope, the trust file and optionally
``--revocations FILE``). ``--export-envelope`` prints the envelope of a valid
attestation, ``--export-revocations`` every recorded revocation (deploy jobs place both
on nodes for ``imagectl verify-node``); ``--export-trust`` prints the configured signer's
public key as a trust file (to enroll in the repository's anchor, reviewed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from imagectl.cli.common import cloud_option, console, emit_json, json_option, stack_option
from imagectl.errors import EXIT_FAILED, EXIT_OK, UserError

_FILE = click.Path(path_type=Path, dir_okay=False)


@click.command("verify")
@click.argument("image", required=False)
@stack_option("Scope a cloud image id to this stack.")
@cloud_option("Scope a cloud image id to this cloud.")
@click.option(
    "--trust",
    "trust",
    type=_FILE,
    help="Trusted public keys (JSON; default: $IMAGECTL_ATTESTATION_TRUST, else the "
    "repository's keys/attestation-trust.json).",
)
@click.option(
    "--envelope",
    type=_FILE,
    help="Verify this envelope offline (no catalog): IMAGE is the cloud image id.",
)
@click.option(
    "--revocations",
    type=_FILE,
    help="With --envelope: revocations to honour (`--export-revocations` output).",
)
@click.option("--export-trust", is_flag=True, help="Print the signer's public key as a trust file.")
@click.option(
    "--export-envelope",
    is_flag=True,
    help="Print the image's envelope (JSON) when it verifies, for nodes that check it "
    "at boot (`imagectl verify-node`).",
)
@click.option(
    "--export-revocations",
    is_flag=True,
    help="Print every recorded revocation (JSON) for deploy jobs and nodes.",
)
@json_option
def command(
    image: str | None,
    stack: str | None,
    cloud: str | None,
    trust: Path | None,
    envelope: Path | None,
    revocations: Path | None,
    export_trust: bool,
    export_envelope: bool,
    export_revocations: bool,
    as_json: bool,
) -> int:
    """Check IMAGE's signed validation attestation (catalog id or cloud image id)."""
    from imagectl.provenance.keys import load_signer, load_trust, trust_document

    if export_trust:
        click.echo(trust_document([load_signer()[1]]), nl=False)
        return EXIT_OK
    if export_revocations:
        return _export_revocations(stack)
    if not image:
        raise UserError("name the IMAGE to verify", hint="See `imagectl verify --help`")
    if revocations and not envelope:
        raise UserError(
            "--revocations goes with --envelope",
            hint="Without --envelope the catalog's revocations are used",
        )
    keys = load_trust(trust)
    result = _offline(image, envelope, revocations, keys, cloud) if envelope else _catalog(
        image, stack, cloud, keys)  # fmt: skip
    if export_envelope and result.valid:
        click.echo(json.dumps(result.envelope, indent=2))
    elif as_json:
        emit_json(result.to_dict())
    else:
        from rich.markup import escape

        out = console()
        if result.valid:
            out.print(
                f"[green]valid[/]: {escape(result.image)} is attested by {result.digest}, "
                f"signed by key {str(result.keyid or '-')[:16]}"
            )
        else:
            word = "revoked" if result.revoked else "not valid"
            out.print(f"[red]{word}[/]: {escape(result.image)}")
            for reason in result.reasons:
                out.print(f"  - {reason}", soft_wrap=True, markup=False)
    return EXIT_OK if result.valid else EXIT_FAILED


def _catalog(image: str, stack: str | None, cloud: str | None, keys: list[Any]) -> Any:
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import resolve_image
    from imagectl.provenance.verify import verify_image

    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            img = resolve_image(s, image, stack=stack, cloud=cloud, allow_replica=True)
            return verify_image(s, img, keys)
    finally:
        catalog.close()


def _read(path: Path, what: str) -> Any:
    from imagectl.validators.attestation import BadAttestationInput, _read_json

    try:
        return _read_json(path, what)
    except BadAttestationInput as exc:
        raise UserError(str(exc), where=str(path)) from None


def _offline(
    image: str, envelope: Path, revocations: Path | None, keys: list[Any], cloud: str | None
) -> Any:
    from imagectl.provenance.verify import verify_envelope

    return verify_envelope(
        image,
        _read(envelope, "attestation"),
        keys,
        cloud=cloud,
        revocations=_read(revocations, "revocations file") if revocations else None,
        where=f"the attestation {envelope}",
    )


def _export_revocations(stack: str | None) -> int:
    from imagectl.catalog.db import open_catalog
    from imagectl.provenance.verify import export_revocations

    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            doc = export_revocations(s, stack)
    finally:
        catalog.close()
    click.echo(json.dumps(doc, indent=2))
    return EXIT_OK
