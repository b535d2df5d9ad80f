"""Rotating the trust anchor by a signed trust document (TUF's root rotation).

The TUF specification's client workflow, "Update the root role" (v1.0.x): the next trust
document is signed by a threshold of the trusted document's keys and by a threshold of its
own (5.3.4), its version is exactly the trusted one's plus one (5.3.5; 5.3.9: one at a
time), it replaces the trust file (5.3.7-5.3.8), and when the keys changed the revocation
list's version floor is deleted (5.3.11: recovery from a fast-forward attack). Through
``validators.trust_rotation.rotate`` (used by ``imagectl verify --rotate-trust`` and
``imagectl verify-node --rotate-trust``) and through those commands."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from imagectl.provenance.attest import sign_statement
from imagectl.provenance.revocations import list_envelope
from imagectl.validators.attestation import (
    BadAttestationInput,
    TrustedKeys,
    parse_trust,
    verify_node,
)
from imagectl.validators.trust_rotation import document, rotate, sign
from tests.provenance.statements import AMI, good_statement
from tests.support import flat

FAST_FORWARD = 10**15


def _keys(signers: list[CryptoSigner], threshold: int = 1) -> TrustedKeys:
    keys = TrustedKeys(s.public_key for s in signers)
    keys.threshold = threshold
    return keys


def _trust(path: Path, signers: list[CryptoSigner], threshold: int = 1, version: int = 1) -> Path:
    path.write_text(json.dumps(document(_keys(signers, threshold), version)))
    return path


def _rotation(path: Path, new: list[CryptoSigner], version: int, by: list[CryptoSigner],
              threshold: int = 1) -> Path:  # fmt: skip
    path.write_text(json.dumps(sign(document(_keys(new, threshold), version), by)))
    return path


def _gen(n: int) -> list[CryptoSigner]:
    return [CryptoSigner.generate_ed25519() for _ in range(n)]


def _refused(trust: Path, rotation: Path, seen: Path | None = None) -> str:
    before = trust.read_bytes()
    with pytest.raises(BadAttestationInput) as caught:
        rotate(trust, rotation, seen)
    assert trust.read_bytes() == before  # nothing written
    return flat(str(caught.value))


def test_a_valid_rotation_installs_the_next_document(tmp_path: Path) -> None:
    a, b, c, d = _gen(4)
    trust = _trust(tmp_path / "trust.json", [a, b, c], threshold=2)
    # two of the three old keys and the new document's own key sign version 2
    new, reset = rotate(trust, _rotation(tmp_path / "r.json", [d], 2, by=[a, c, d]), None)
    assert [k.keyid for k in new] == [d.public_key.keyid] and new.version == 2
    installed = parse_trust(trust)  # the file in place, read as every trust file is
    assert [k.keyid for k in installed] == [d.public_key.keyid] and installed.version == 2
    assert reset is False  # no floor was given
    # and the next one chains from it: signed by d (the keys now trusted) and its own
    rotate(trust, _rotation(tmp_path / "r3.json", [a, b], 3, by=[d, a]), None)
    assert parse_trust(trust).version == 3


def test_one_signed_by_too_few_old_keys_is_refused(tmp_path: Path) -> None:
    a, b, c, d = _gen(4)
    trust = _trust(tmp_path / "trust.json", [a, b, c], threshold=2)
    text = _refused(trust, _rotation(tmp_path / "r.json", [d], 2, by=[a, d]))
    assert "not signed by 2 distinct trusted keys of the trust document in use" in text, text
    assert "5.3.4" in text and "unchanged" in text
    # a signature by a key the old document does not list counts for nothing
    text = _refused(trust, _rotation(tmp_path / "r.json", [d], 2, by=[d, *_gen(2)]))
    assert "of the trust document in use" in text, text


def test_one_not_signed_by_its_own_keys_is_refused(tmp_path: Path) -> None:
    a, d, e = _gen(3)
    trust = _trust(tmp_path / "trust.json", [a])
    text = _refused(trust, _rotation(tmp_path / "r.json", [d], 2, by=[a]))
    assert "of the new trust document (version 2)" in text and "its own keys" in text, text
    # its threshold counts too: two new keys required, one signed
    text = _refused(trust, _rotation(tmp_path / "r.json", [d, e], 2, by=[a, d], threshold=2))
    assert "not signed by 2 distinct trusted keys of the new trust document" in text, text


def test_a_skipped_version_is_refused(tmp_path: Path) -> None:
    a, d = _gen(2)
    trust = _trust(tmp_path / "trust.json", [a])
    text = _refused(trust, _rotation(tmp_path / "r.json", [d], 3, by=[a, d]))
    assert "is version 3, but the next trust document is version 2" in text, text
    assert "apply version 2 first" in text and "5.3.5" in text


def test_a_rollback_to_an_older_trust_document_is_refused(tmp_path: Path) -> None:
    a, b, x = _gen(3)
    trust = _trust(tmp_path / "trust.json", [a])
    second = _rotation(tmp_path / "r2.json", [b], 2, by=[a, b])
    rotate(trust, second, None)
    rotate(trust, _rotation(tmp_path / "r3.json", [b], 3, by=[b]), None)
    # the same document again, and an older version the trusted key signed (listing a key
    # an attacker holds): each is a rollback
    text = _refused(trust, _rotation(tmp_path / "old.json", [b, x], 2, by=[b, x]))
    assert "is version 2, not newer than the trust document in use (version 3)" in text, text
    assert "rollback" in text and "5.3.5" in text
    text = _refused(trust, _rotation(tmp_path / "same.json", [b], 3, by=[b]))
    assert "rollback" in text, text
    # the first rotation replayed (b, still trusted, signed it too)
    assert "is version 2, not newer" in _refused(trust, second)


def _node(etc: Path, signer: CryptoSigner) -> dict[str, Path]:
    etc.mkdir(parents=True, exist_ok=True)
    manifest = etc / "manifest.json"
    manifest.write_text('{"build_id": "b-1"}\n')
    statement = good_statement(hashlib.sha256(manifest.read_bytes()).hexdigest())
    (etc / "attestation.dsse.json").write_text(json.dumps(sign_statement(statement, signer)))
    return {"manifest": manifest, "envelope": etc / "attestation.dsse.json"}


def _list(path: Path, signer: CryptoSigner, version: int) -> Path:
    path.write_text(json.dumps(list_envelope(
        [], version=version, signers=[signer],
        expires=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=24),
    )))  # fmt: skip
    return path


@pytest.mark.parametrize("floor_keys", ["the old keys", "no keys (an old floor)"])
def test_the_rotation_resets_the_revocation_floor(tmp_path: Path, floor_keys: str) -> None:
    """A stolen key numbered a list 10^15: the node's floor. The signed rotation to the new
    key deletes it (5.3.11), so the new key's lists count from their own. A floor kept
    before floors named their keys binds every key set: only the reset frees it."""
    old, new = _gen(2)
    trust, seen = _trust(tmp_path / "trust.json", [old]), tmp_path / "seen.json"
    floor = {"version": FAST_FORWARD, "digest": "sha256-x"}
    if floor_keys == "the old keys":
        floor["keys"] = [old.public_key.keyid]
    seen.write_text(json.dumps(floor))
    node = _node(tmp_path / "etc", new)  # the deploy system places the new key's envelope

    def verify(version: int) -> list[str]:
        return verify_node(
            node["envelope"], trust, node["manifest"], image_id=AMI, cloud="aws",
            region="us-east-1", revocations_file=_list(tmp_path / "l.json", new, version),
            seen_file=seen,
        )  # fmt: skip

    now = int(time.time())
    _, reset = rotate(trust, _rotation(tmp_path / "r.json", [new], 2, by=[old, new]), seen)
    assert reset and not seen.exists()
    assert verify(now) == []
    assert json.loads(seen.read_text())["keys"] == [new.public_key.keyid]
    assert "rollback" in " ".join(verify(now - 1))  # the new floor holds


def test_without_a_rotation_an_old_floor_still_binds(tmp_path: Path) -> None:
    """The control: root installs the new key without a rotation, and a floor kept before
    floors named their keys still refuses the new key's list, naming what recovers."""
    new = CryptoSigner.generate_ed25519()
    trust, seen = _trust(tmp_path / "trust.json", [new]), tmp_path / "seen.json"
    seen.write_text(json.dumps({"version": FAST_FORWARD, "digest": "sha256-x"}))
    node = _node(tmp_path / "etc", new)
    reasons = " ".join(verify_node(
        node["envelope"], trust, node["manifest"], image_id=AMI, cloud="aws",
        region="us-east-1", revocations_file=_list(tmp_path / "l.json", new, 5), seen_file=seen,
    ))  # fmt: skip
    assert "rollback" in reasons and "imagectl verify --rotate-trust" in flat(reasons)


def _signer_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, signer: CryptoSigner) -> None:
    pem = tmp_path / f"{signer.public_key.keyid[:8]}.pem"
    pem.touch(mode=0o600)
    pem.write_bytes(signer.private_bytes)
    monkeypatch.setenv("IMAGECTL_ATTESTATION_SIGNER", f"file2:{pem}")


def test_the_commands_sign_in_turn_rotate_and_refuse_a_replay(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imagectl.provenance.revocations import seen_file

    old, new = _gen(2)
    trust = _trust(tmp_path / "trust.json", [old])
    (tmp_path / "new.json").write_text(json.dumps(document(_keys([new]), 1)))
    seen_file().parent.mkdir(parents=True, exist_ok=True)
    seen_file().write_text(json.dumps({"version": FAST_FORWARD, "digest": "sha256-x",
                                       "keys": [old.public_key.keyid]}))  # fmt: skip
    # each key holder signs in turn: the old key, then the new one adds its signature
    _signer_env(monkeypatch, tmp_path, old)
    r = cli("verify", "--trust", str(trust), "--sign-trust", str(tmp_path / "new.json"))
    assert r.code == 0, r.err
    (tmp_path / "half.json").write_text(str(r.out))
    r = cli("verify", "--trust", str(trust), "--rotate-trust", str(tmp_path / "half.json"))
    assert r.code == 2 and "its own keys" in r.err, r.err
    _signer_env(monkeypatch, tmp_path, new)
    r = cli("verify", "--trust", str(trust), "--sign-trust", str(tmp_path / "half.json"))
    assert r.code == 0, r.err
    (tmp_path / "rotation.json").write_text(str(r.out))
    r = cli("verify", "--trust", str(trust), "--rotate-trust", str(tmp_path / "rotation.json"))
    assert r.code == 0, r.err
    assert f"trust rotated: {trust} is now version 2" in r.out
    assert "version floor kept under the old keys was reset" in r.out
    assert not seen_file().exists()
    assert [k.keyid for k in parse_trust(trust)] == [new.public_key.keyid]
    r = cli("verify", "--trust", str(trust), "--rotate-trust", str(tmp_path / "rotation.json"))
    assert r.code == 2 and "rollback to an older trust anchor" in r.err, r.err
    # on a node, the same check through verify-node
    (tmp_path / "n2.json").write_text(json.dumps(sign(document(_keys([old]), 3), [new, old])))
    node_seen, rotation = str(tmp_path / "node-seen.json"), str(tmp_path / "n2.json")
    r = cli("verify-node", "--trust", str(trust), "--revocations-state", node_seen,
            "--rotate-trust", rotation)  # fmt: skip
    assert r.code == 0 and f"trust rotated: {trust} is now version 3" in r.out, r.err
