"""Recovery from a fast-forwarded revocation list (TUF's fast-forward attack).

A stolen signing key signs a list numbered far ahead (version 10^15); every verifier that
sees it keeps that version as its floor, and every correct list after it looks like a
rollback. TUF's answer (specification, "Update the root role", 5.3.11: "If the timestamp
and / or snapshot keys have been rotated, then delete the trusted timestamp and snapshot
metadata files ... to recover from fast-forward attacks"): the version floor is kept per set
of trusted keys, so a rotated trust anchor (a trust file the node's root installs, checked
as every trust file is) starts its own floor, and rollback stays refused within it. The
refusal explains this and names the commands that recover. Through the node's
``verify_node`` and the controller's ``imagectl verify`` (the production paths)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from pathlib import Path

from securesystemslib.signer import CryptoSigner

from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import trust_document
from imagectl.provenance.revocations import list_envelope
from imagectl.validators.attestation import verify_node
from tests.provenance.statements import AMI, good_statement
from tests.support import flat

FAST_FORWARD = 10**15


def _statement(manifest: bytes) -> dict:
    return good_statement(hashlib.sha256(manifest).hexdigest())


def _list(path: Path, signer: CryptoSigner, version: int) -> Path:
    path.write_text(json.dumps(list_envelope(
        [], version=version, signers=[signer],
        expires=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=24),
    )))  # fmt: skip
    return path


def _node(tmp_path: Path, signer: CryptoSigner) -> dict[str, Path]:
    etc = tmp_path / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    manifest = etc / "manifest.json"
    manifest.write_text('{"build_id": "b-1"}\n')
    (etc / "trust.json").write_text(trust_document([signer.public_key]))
    envelope = sign_statement(_statement(manifest.read_bytes()), signer)
    (etc / "attestation.dsse.json").write_text(json.dumps(envelope))
    return {"etc": etc, "manifest": manifest, "trust": etc / "trust.json",
            "envelope": etc / "attestation.dsse.json", "seen": tmp_path / "seen.json"}  # fmt: skip


def _verify_node(node: dict[str, Path], revocations: Path) -> list[str]:
    return verify_node(
        node["envelope"], node["trust"], node["manifest"], image_id=AMI, cloud="aws",
        region="us-east-1", revocations_file=revocations, seen_file=node["seen"],
    )  # fmt: skip


def test_a_node_recovers_from_a_fast_forwarded_list_by_rotating_its_anchor(tmp_path) -> None:
    old, new = CryptoSigner.generate_ed25519(), CryptoSigner.generate_ed25519()
    node = _node(tmp_path, old)
    lists = node["etc"]
    # the stolen key's list, numbered far ahead: the node keeps it as its floor
    assert _verify_node(node, _list(lists / "ff.json", old, FAST_FORWARD)) == []
    assert json.loads(node["seen"].read_text())["version"] == FAST_FORWARD
    # the correct next list, same keys: a rollback, explained, with what recovers
    now = int(time.time())
    refused = " ".join(_verify_node(node, _list(lists / "l.json", old, now)))
    assert f"older than version {FAST_FORWARD}" in refused and "rollback" in refused
    for words in ("fast-forward attack", "rotating the trust anchor", "5.3.11",
                  "`imagectl verify --export-trust`", "`imagectl verify --export-revocations`",
                  "nothing has to be deleted by hand"):  # fmt: skip
        assert words in refused, refused
    # root installs the rotated anchor (the new signer's key, not the stolen one), and the
    # image is attested again by it: the new keys' lists pass from their own floor
    node = _node(tmp_path, new)
    assert _verify_node(node, _list(lists / "l.json", new, now)) == []
    kept = json.loads(node["seen"].read_text())
    assert kept["version"] == now and kept["keys"] == [new.public_key.keyid]
    # rollback is still refused within the new keys' floor
    assert "rollback" in " ".join(_verify_node(node, _list(lists / "l.json", new, now - 1)))
    # and the stolen key's list is nobody's to trust any more
    assert "not signed by a trusted key" in " ".join(_verify_node(node, lists / "ff.json"))


def test_imagectl_verify_explains_and_recovers(tmp_path: Path, cli) -> None:
    old, new = CryptoSigner.generate_ed25519(), CryptoSigner.generate_ed25519()
    node_old, node_new = _node(tmp_path / "a", old), _node(tmp_path / "b", new)

    def verify(node: dict[str, Path], revocations: Path) -> tuple[int, str]:
        r = cli("verify", f"us-east-1/111122223333/{AMI}", "--cloud", "aws", "--trust",
                str(node["trust"]), "--envelope", str(node["envelope"]), "--revocations",
                str(revocations))  # fmt: skip
        return int(r.code), flat(r.out + r.err)

    code, text = verify(node_old, _list(tmp_path / "ff.json", old, FAST_FORWARD))
    assert code == 0, text
    code, text = verify(node_old, _list(tmp_path / "l.json", old, int(time.time())))
    assert code == 1 and "rollback" in text and "imagectl verify --export-trust" in text, text
    # after the rotation the new keys' list passes, from the same state folder
    code, text = verify(node_new, _list(tmp_path / "l.json", new, int(time.time())))
    assert code == 0, text


def test_the_new_signer_counts_from_its_own_floor(tmp_path: Path) -> None:
    """``--export-revocations`` after the rotation: the new key's list is numbered from its
    own floor (the time), not after the stolen key's 10^15; the old key's count goes on."""
    from imagectl.catalog.db import open_catalog
    from imagectl.provenance.revocations import seen_file, sign_list

    old, new = CryptoSigner.generate_ed25519(), CryptoSigner.generate_ed25519()
    seen_file().parent.mkdir(parents=True, exist_ok=True)
    seen_file().write_text(json.dumps({"version": FAST_FORWARD, "digest": "sha256-x",
                                       "keys": [old.public_key.keyid]}))  # fmt: skip
    catalog = open_catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    try:
        with catalog.transaction() as s:
            renewed = json.loads(_payload(sign_list(s, new)))["version"]
            continued = json.loads(_payload(sign_list(s, old)))["version"]
    finally:
        catalog.close()
    assert abs(renewed - time.time()) < 60, renewed
    assert continued == FAST_FORWARD + 1


def _payload(envelope: dict) -> bytes:
    import base64

    return base64.b64decode(envelope["payload"])
