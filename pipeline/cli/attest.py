"""``imagectl attest IMAGE``: sign a validated image's attestation again.

A validation that decides ``validated`` signs one itself; this command is for when that
signing failed (a KMS outage, no signer configured) or the signing key was rotated. It
signs what the catalog's newest receipts say, with ``$IMAGECTL_ATTESTATION_SIGNER``
(default: the state folder's key), records it and tags the image.

It is the only command that creates a key: with no signer configured and no local key,
it makes the state folder's ed25519 key (``keys/attestation.pem``, 0600). ``--new-key``
does only that, and prints the public key as a trust file (to enroll, reviewed, in the
repository's ``keys/attestation-trust.json``, or to name with ``--trust``)."""

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


@click.command("attest")
@click.argument("image", required=False, shell_complete=complete_images)
@stack_option("Scope a cloud image id to this stack.")
@cloud_option("Scope a cloud image id to this cloud.")
@click.option(
    "--new-key",
    is_flag=True,
    help="Create the state folder's signing key (when no signer is configured and none "
    "exists) and print its public key as a trust file.",
)
@click.option(
    "--save-trust",
    is_flag=True,
    help="With --new-key: also write the public key as the state folder's trust file "
    "(keys/attestation-trust.json there) and record it in the state folder's settings "
    "(settings.toml, attestation_trust), so verify and promote trust it in every shell "
    "without $IMAGECTL_ATTESTATION_TRUST (--trust and that variable still come first).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    image: str | None,
    stack: str | None,
    cloud: str | None,
    new_key: bool,
    save_trust: bool,
    as_json: bool,
) -> None:
    """Sign and record IMAGE's validation attestation (catalog id or cloud image id)."""
    import os

    from imagectl.provenance.keys import ENV_SIGNER, ensure_local_key, load_signer, trust_document

    if not os.environ.get(ENV_SIGNER, "").strip():
        ensure_local_key()  # the one command that makes a key
    if save_trust and not new_key:
        raise UserError(
            "--save-trust goes with --new-key",
            hint="Run `imagectl attest --new-key --save-trust`",
        )
    if new_key:
        document = trust_document([load_signer()[1]])
        if save_trust:
            _save_trust(document)
        click.echo(document, nl=False)
        return
    if not image:
        raise UserError("name the IMAGE to attest", hint="Or --new-key to only create the key")
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import resolve_image
    from imagectl.promotion.context import load_stack_for, provider_for
    from imagectl.provenance.attest import attest_image

    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            img = resolve_image(s, image, stack=stack, cloud=cloud)
            pk, stack_name, cloud_name = img.id, img.stack, img.cloud
            image_id, label = img.cloud_image_id, img.label
        provider = provider_for(load_stack_for(workspace(ctx), stack_name), cloud_name)
        attested = attest_image(catalog, pk, provider)
    finally:
        catalog.close()
    if as_json:
        emit_json(
            {"image": image_id, "label": label, "catalog_id": pk, "digest": attested.digest,
             "keyid": attested.keyid, "file": str(attested.path)}
        )  # fmt: skip
        return
    console().print(
        f"attested: {attested.digest} signed by key {attested.keyid[:16]} ({attested.path})",
        markup=False,
    )


def _save_trust(document: str) -> None:
    """The state folder's trust file, named in its settings (``imagectl.state_settings``)."""
    from imagectl.core.fsutil import atomic_write, private_dir
    from imagectl.paths import state_dir
    from imagectl.state_settings import save_setting

    keys = private_dir(state_dir() / "keys")
    path = atomic_write(keys / "attestation-trust.json", document, mode=0o644)
    settings = save_setting("attestation_trust", str(path))
    console(stderr=True).print(
        f"trusted in this state folder: {path} (attestation_trust in {settings}); verify "
        "and promote use it unless --trust or $IMAGECTL_ATTESTATION_TRUST names another",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
