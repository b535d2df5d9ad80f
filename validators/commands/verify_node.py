"""``imagectl verify-node``: on a fleet node, is the booted image attested?

Run by the boot unit before validation when the image was built with
``validator_require_attestation`` (playbooks/roles/validator): exit 0 when the envelope is
signed by a key of the image's trust file, names the image this instance booted from
(the cloud's instance metadata: AWS IMDSv2 ``ami-id``, Google Cloud ``instance/image``,
Azure IMDS ``storageProfile/imageReference`` id, the local cloud's QEMU fw_cfg
``opt/imagectl/image_id``) and this image's manifest, holds together (verdict pass and
every receipt passed), the signed revocation list beside it holds (no older version
than the one this node kept in ``--revocations-state``, not expired; a missing list
fails closed) and names it not; exit 1 (the unit fails, the node is not ready)
otherwise; exit 2 when a file is missing, empty or not
what it should be. Uses only the validator's own package (``validators.attestation``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from imagectl.core.errors import EXIT_FAILED, EXIT_OK, UserError
from imagectl.core.output import F, console, json_option, show
from imagectl.validators.attestation import BadAttestationInput, verify_node
from imagectl.validators.commands.options import FILE, image_id_option


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _node_file(option: str, default: str, help: str) -> Callable[[F], F]:
    """A file the deploy system or the build placed on the node, at its usual path."""
    return click.option(option, type=FILE, default=Path(default), show_default=True, help=help)


@click.command("verify-node")
@_node_file(
    "--envelope",
    "/etc/imagectl/attestation.dsse.json",
    "The image's attestation (DSSE envelope), placed by the deploy system.",
)
@_node_file(
    "--trust",
    "/etc/imagectl/attestation-trust.json",
    "The public keys trusted to sign (written into the image at build time).",
)
@_node_file(
    "--manifest",
    "/etc/imagectl/manifest.json",
    "This image's manifest: its sha256 must be the attested one.",
)
@_node_file(
    "--revocations",
    "/etc/imagectl/attestation-revocations.json",
    "The signed revocation list placed by the deploy system (`imagectl verify "
    "--export-revocations`); required: without it the node fails closed.",
)
@_node_file(
    "--revocations-state",
    "/var/lib/imagectl/revocations-seen.json",
    "Where this node keeps the highest revocation list version it has seen (an older "
    "list is refused).",
)
@image_id_option("The image this node booted from (default: the cloud's instance metadata).")
@click.option(
    "--rotate-trust",
    type=FILE,
    help="Install this signed trust document (what `imagectl verify --sign-trust NEW.json` "
    "prints) in place of --trust, and reset the revocation floor kept under the old keys.",
)
@json_option
def command(
    envelope: Path,
    trust: Path,
    manifest: Path,
    revocations: Path,
    revocations_state: Path,
    image_id: str | None,
    rotate_trust: Path | None,
    as_json: bool,
) -> int:
    """Refuse (exit 1) unless this node's image carries a valid signed attestation."""
    if rotate_trust is not None:
        return _rotate(trust, rotate_trust, revocations_state, as_json)
    cloud = region = None
    if not image_id:
        from imagectl.validators.host.metadata import booted_image

        found = booted_image()
        image_id, cloud, region = (_text(found.get(k)) for k in ("image_id", "cloud", "region"))
    try:
        reasons = verify_node(
            envelope, trust, manifest, image_id=image_id, cloud=cloud, region=region,
            revocations_file=revocations, seen_file=revocations_state,
        )  # fmt: skip
    except BadAttestationInput as exc:
        raise UserError(
            str(exc),
            hint="Place the image's attestation on the node (`imagectl verify IMAGE "
            "--export-envelope`); the trust file is written at build time from the "
            "repository's keys/attestation-trust.json",
        ) from None
    payload = {"valid": not reasons, "reasons": reasons, "envelope": str(envelope),
               "image_id": image_id}  # fmt: skip
    show(as_json, payload, lambda: _view(reasons, f"{envelope} holds for {manifest} ({image_id})"))
    return EXIT_OK if not reasons else EXIT_FAILED


def _rotate(trust: Path, rotation: Path, seen: Path, as_json: bool) -> int:
    """``--rotate-trust``: TUF's root rotation on the node (``validators.trust_rotation``)."""
    from imagectl.validators.trust_rotation import rotate

    try:
        new, reset = rotate(trust, rotation, seen)
    except BadAttestationInput as exc:
        raise UserError(
            str(exc),
            hint="Sign the next version with a threshold of the current keys and of its own "
            "(`imagectl verify --sign-trust NEW.json`), or have root install the trust file",
        ) from None
    payload = {"trust": str(trust), "version": new.version, "floor_reset": reset}
    show(as_json, payload, lambda: console().print(
        f"trust rotated: {trust} is now version {new.version}"
        + ("; the revocation floor kept under the old keys was reset (TUF 5.3.11)" if reset
           else ""), markup=False, soft_wrap=True))  # fmt: skip
    return EXIT_OK


def _view(reasons: list[str], attested: str) -> None:
    from imagectl.core.safetext import plain

    out = console()
    if not reasons:
        out.print(plain(f"attested: {attested}"), markup=False)
        return
    out.print("[red]not attested[/]: this node's image fails its attestation")
    for reason in reasons:
        out.print(f"  - {plain(reason)}", soft_wrap=True, markup=False)
