"""``imagectl verify --sign-trust`` and ``--rotate-trust``: the trust anchor rotated by
signature (TUF's root rotation; the checks are ``validators.trust_rotation``'s, shared
with ``imagectl verify-node --rotate-trust`` on nodes)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from imagectl.cli.common import console
from imagectl.core.errors import EXIT_OK, UserError
from imagectl.validators.attestation import (
    BadAttestationInput,
    _read_json,
    parse_trust,
    trust_from,
)


def sign(new: Path, trust: Path | None) -> int:
    """Print ``new`` (a trust document, or a rotation envelope to sign again) as the next
    version of the trust file in use, signed by the configured signer."""
    from imagectl.provenance.keys import load_signer, trust_path
    from imagectl.validators import trust_rotation

    where = trust_path(trust)
    try:
        current = parse_trust(where)
        doc = _read_json(new, "trust rotation")
        if isinstance(doc, dict) and "payload" in doc:  # an envelope: add a signature
            envelope = trust_rotation.sign({}, [load_signer()[0]], envelope=doc)
        else:
            keys = trust_from(doc, f"the trust document {new}")
            body = trust_rotation.document(keys, current.version + 1)
            envelope = trust_rotation.sign(body, [load_signer()[0]])
    except BadAttestationInput as exc:
        raise UserError(
            str(exc),
            hint='Give a trust document ({"keys": [...]}) or an envelope printed by '
            "`imagectl verify --sign-trust NEW.json`",
        ) from None
    click.echo(json.dumps(envelope, indent=2))
    return EXIT_OK


def rotate(rotation: Path, trust: Path | None) -> int:
    """Install the signed trust document ``rotation`` in place of the trust file in use
    and reset the revocation floor kept under the old keys (TUF 5.3.4-5.3.11)."""
    from imagectl.provenance.keys import trust_path
    from imagectl.provenance.revocations import seen_file
    from imagectl.validators import trust_rotation

    where = trust_path(trust)
    try:
        new, reset = trust_rotation.rotate(where, rotation, seen_file())
    except BadAttestationInput as exc:
        raise UserError(
            str(exc),
            hint="Sign the next version with a threshold of the current keys and of its own "
            "(`imagectl verify --sign-trust NEW.json`, once per key holder), or have root "
            "install the trust file",
        ) from None
    floor = (
        "the revocation list's version floor kept under the old keys was reset (TUF 5.3.11): "
        "publish a list the new keys sign (`imagectl verify --export-revocations`)"
        if reset
        else "no revocation floor was kept under the old keys"
    )
    console().print(
        f"trust rotated: {where} is now version {new.version} ({len(new)} key(s), threshold "
        f"{new.threshold}); {floor}",
        markup=False, highlight=False, soft_wrap=True,
    )  # fmt: skip
    return EXIT_OK
