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
``--revocations FILE``; ``--stack`` and ``--cloud`` scope it as they scope a catalog
lookup, and the image is compared by its full identity, ``imagectl.validators.identity``).
``--export-envelope`` prints the envelope of a valid attestation,
``--export-revocations`` signs and prints a fresh revocation list (every recorded
revocation, a higher version, an expiry ``--valid-hours`` ahead; deploy jobs place both
on nodes for ``imagectl verify-node``, which requires the list); ``--export-trust``
prints the configured signer's public key as a trust file (to enroll in the
repository's anchor, reviewed).

Rotating the trust anchor by signature (TUF's root rotation, ``validators.trust_rotation``):
``--sign-trust NEW.json`` prints the trust document NEW.json as the next version of the
trust file in use, signed by the configured signer (given an envelope it already made, it
adds this signer's signature: each key holder signs in turn); ``--rotate-trust FILE``
installs it in place of the trust file in use once a threshold of the current keys and
a threshold of its own keys signed it and its version is exactly the next one, and then
resets the revocation list's version floor kept under the old keys."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from imagectl.cli.common import cloud_option, console, emit_json, json_option, stack_option
from imagectl.cli.completion import complete_images
from imagectl.core.errors import EXIT_FAILED, EXIT_OK, UserError
from imagectl.core.numbers import Bounded
from imagectl.headline import could_not_run

if TYPE_CHECKING:
    from securesystemslib.signer import Key

    from imagectl.clouds.base import Provider
    from imagectl.provenance.verify import Verification

# what an offline verify judges: the signature, what it names, and revocation
OFFLINE_CHECKS = ("signature", "identity", "revocation")
# from the catalog: the same, with revocation asked of the catalog, the published list and
# the cloud's tag
CATALOG_CHECKS = ("signature", "identity", "catalog", "published list", "cloud tag")

_FILE = click.Path(path_type=Path, dir_okay=False)


@click.command("verify")
@click.argument("image", required=False, shell_complete=complete_images)
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
    help="With --envelope: the signed revocation list to honour (`--export-revocations` "
    "output); refused when older than one seen here, or expired.",
)
@click.option(
    "--valid-hours",
    type=Bounded(0.01, 24 * 366, unit="hours"),
    default=7 * 24,
    show_default=True,
    help="With --export-revocations: hours until the list expires (a list nobody renews "
    "is refused after it: a freeze).",
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
    help="Sign and print a fresh revocation list (JSON) for deploy jobs and nodes.",
)
@click.option(
    "--sign-trust",
    type=_FILE,
    help="Sign this trust document (or add a signature to this rotation envelope) as the "
    "next version of the trust file in use; prints the envelope.",
)
@click.option(
    "--rotate-trust",
    type=_FILE,
    help="Install this signed trust document (`--sign-trust` output, signed by a threshold "
    "of the current keys and of its own) in place of the trust file in use.",
)
@json_option
def command(
    image: str | None,
    stack: str | None,
    cloud: str | None,
    trust: Path | None,
    envelope: Path | None,
    revocations: Path | None,
    valid_hours: float,
    export_trust: bool,
    export_envelope: bool,
    export_revocations: bool,
    sign_trust: Path | None,
    rotate_trust: Path | None,
    as_json: bool,
) -> int:
    """Check IMAGE's signed validation attestation (catalog id or cloud image id)."""
    from imagectl.provenance.keys import load_signer, load_trust, trust_document

    _refuse_dropped(click.get_current_context())
    if sign_trust is not None:
        from imagectl.cli.trust_rotation import sign

        return sign(sign_trust, trust)
    if rotate_trust is not None:
        from imagectl.cli.trust_rotation import rotate

        return rotate(rotate_trust, trust)
    if export_trust:
        click.echo(trust_document([load_signer()[1]]), nl=False)
        return EXIT_OK
    if export_revocations:
        return _export_revocations(stack, valid_hours)
    if not image:
        raise UserError("name the IMAGE to verify", hint="See `imagectl verify --help`")
    if revocations and not envelope:
        raise UserError(
            "--revocations goes with --envelope",
            hint="Without --envelope the catalog's revocations are used",
        )
    keys = load_trust(trust)
    if envelope:
        result, image_id = _offline(image, envelope, revocations, keys, cloud, stack), image
    else:
        result, image_id = _catalog(image, stack, cloud, keys)
    # offline without a revocation list, nobody asked whether the image was revoked; from
    # the catalog, a store that could not be read (the cloud's tag) is a check not run
    not_run = (
        ["revocation (no --revocations FILE: whether the image was revoked is unknown)"]
        if envelope and not revocations
        else [r for r in result.reasons if r.startswith("cannot read ")]
    )
    headline = could_not_run(len(OFFLINE_CHECKS if envelope else CATALOG_CHECKS), not_run)
    if export_envelope and result.valid:
        click.echo(json.dumps(result.envelope, indent=2))
    elif as_json:
        emit_json({**result.to_dict(), "image": image_id, "label": result.image,
                   "complete": not not_run, "headline": headline})  # fmt: skip
    else:
        from imagectl.core.safetext import markup, plain

        out = console()
        if headline:  # first, before "valid"
            out.print(f"[yellow]{markup(headline)}[/]", soft_wrap=True)
        if result.valid:
            out.print(
                f"[green]valid[/]: {markup(result.image)} is attested by {result.digest}, "
                f"signed by key {markup(str(result.keyid or '-')[:16])}"
            )
        else:
            word = "revoked" if result.revoked else "not valid"
            out.print(f"[red]{word}[/]: {markup(result.image)}")
            for reason in result.reasons:
                out.print(f"  - {plain(reason)}", soft_wrap=True, markup=False)
    return EXIT_OK if result.valid else EXIT_FAILED


def _refuse_dropped(ctx: click.Context) -> None:
    """An option the chosen mode does not read is refused (exit 2), never dropped."""
    p = ctx.params
    source = ctx.get_parameter_source("valid_hours")
    exports = [f"--{n.replace('_', '-')}" for n in ("export_trust", "export_envelope",
               "export_revocations", "sign_trust", "rotate_trust") if p[n]]  # fmt: skip
    if len(exports) > 1:
        raise UserError(f"{' and '.join(exports)} each print one document", hint="Pass one")
    unread = []
    if source is not None and source.name != "DEFAULT" and not p["export_revocations"]:
        unread.append(("--valid-hours", "is the expiry of --export-revocations' list"))
    if p["export_trust"] or p["export_revocations"] or p["sign_trust"] or p["rotate_trust"]:
        named = [o for o, v in (("IMAGE", p["image"]), ("--envelope", p["envelope"]),
                                ("--revocations", p["revocations"])) if v]  # fmt: skip
        unread += [(o, f"is not read by {exports[0]}") for o in named]
        if p["as_json"]:
            unread.append(("--json", f"is not read by {exports[0]} (its output is JSON)"))
    if p["export_envelope"] and p["as_json"]:
        unread.append(("--json", "is not read by --export-envelope (it prints the envelope)"))
    if unread:
        option, why = unread[0]
        raise UserError(f"{option} {why}", hint=f"Drop {option}")


def _catalog(
    image: str, stack: str | None, cloud: str | None, keys: list[Key]
) -> tuple[Verification, str]:
    """The catalog's verdict on IMAGE, and its cloud image id."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion import resolve_image
    from imagectl.provenance.verify import verify_image

    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            img = resolve_image(s, image, stack=stack, cloud=cloud, allow_replica=True)
            img_stack, img_cloud = img.stack, img.cloud
        provider = _provider(img_stack, img_cloud)
        with catalog.transaction() as s:
            img = resolve_image(s, image, stack=stack, cloud=cloud, allow_replica=True)
            return verify_image(s, img, keys, provider=provider), img.cloud_image_id
    finally:
        catalog.close()


def _provider(stack: str, cloud: str) -> Provider:
    """The image's cloud, asked for its ``imagectl:revoked`` tag (a stack or cloud that
    cannot be opened: bad input, exit 2)."""
    from imagectl.paths import find_workspace
    from imagectl.promotion.context import load_stack_for, provider_for

    return provider_for(load_stack_for(find_workspace(), stack), cloud)


def _read(path: Path, what: str) -> object:
    from imagectl.validators.attestation import BadAttestationInput, _read_json

    try:
        return _read_json(path, what)
    except BadAttestationInput as exc:
        raise UserError(str(exc), where=str(path)) from None


def _offline(
    image: str,
    envelope: Path,
    revocations: Path | None,
    keys: list[Key],
    cloud: str | None,
    stack: str | None,
) -> Verification:
    from imagectl.provenance.verify import verify_envelope

    return verify_envelope(
        image,
        _read(envelope, "attestation"),
        keys,
        cloud=cloud,
        stack=stack,
        revocations=_read(revocations, "revocations file") if revocations else None,
        where=f"the attestation {envelope}",
    )


def _export_revocations(stack: str | None, valid_hours: float) -> int:
    from imagectl.catalog.db import open_catalog
    from imagectl.provenance.keys import load_signer, load_trust
    from imagectl.provenance.revocations import publish_list

    if stack:
        raise UserError(
            "--export-revocations signs one list of every stack's revocations (a list per "
            "stack would let one stack's older list hide another's)",
            hint="Leave --stack out",
        )
    signer, _public = load_signer()
    catalog = open_catalog()
    try:
        with catalog.transaction() as s:
            doc = publish_list(s, signer, _trust_or_none(load_trust), valid_hours=valid_hours)
    finally:
        catalog.close()
    click.echo(json.dumps(doc, indent=2))
    return EXIT_OK


def _trust_or_none(load: Callable[[Path | None], list[Key]]) -> list[Key] | None:
    """The configured trust (to keep the new list's version as seen), None when none is."""
    try:
        return load(None)
    except UserError:
        return None
