"""The trust anchor cannot be bent, and what verify reads is bounded.

Key ids are computed from their key as securesystemslib computes them (sha256 of the
canonical JSON of keytype, scheme and keyval: ``compute_default_keyid``; the TUF
specification's KEYID), so a second entry that pairs a trusted key id with an
attacker's key is refused; a ``threshold`` needs that many distinct trusted keys (TUF:
"signatures by keys that are not the role's keys, or repeated signatures from one key,
do not count toward the threshold"); trust, envelope and revocation files others can
write (or a symlink to one, or in a folder others can write) are refused, as the signing
key is. DSSE (protocol.md): "Verify the signature first. Only after it verifies, parse
the payload" - so a payload that is not even JSON, signed by a stranger, is a signature
failure (exit 1), not a parse error; and nesting is measured before any parse.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import trust_document
from tests.provenance.statements import IMAGE, good_statement
from tests.support import flat

ALICE, BOB, MALLORY = (CryptoSigner.generate_ed25519() for _ in range(3))


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "state"))


def _signed(*signers: CryptoSigner) -> dict:
    envelope = sign_statement(good_statement(), signers[0])
    for extra in signers[1:]:
        envelope["signatures"] += sign_statement(good_statement(), extra)["signatures"]
    return envelope


def _files(tmp_path: Path, trust: dict | str, envelope: dict) -> tuple[Path, Path]:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    t, e = folder / "trust.json", folder / "env.json"
    t.write_text(trust if isinstance(trust, str) else json.dumps(trust))
    e.write_text(json.dumps(envelope))
    return t, e


def _trust(*signers: CryptoSigner, **extra: object) -> dict:
    doc = json.loads(trust_document([s.public_key for s in signers]))
    return {**doc, **extra}


def _verify(cli, trust: Path, envelope: Path, *more: str):
    return cli("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope), "--trust",
               str(trust), *more)  # fmt: skip


def test_a_trusted_key_id_paired_with_another_key_is_refused(tmp_path: Path, cli) -> None:
    honest = _trust(ALICE)
    forged = json.loads(trust_document([MALLORY.public_key]))["keys"][0]
    forged["keyid"] = ALICE.public_key.keyid  # the trusted id, the attacker's key
    trust, envelope = _files(tmp_path, {"keys": [*honest["keys"], forged]}, _signed(MALLORY))
    r = _verify(cli, trust, envelope)
    assert r.code == 2 and "is not its key's" in flat(r.err), r.err
    assert "Traceback" not in r.err
    # the honest file verifies the honest envelope, and refuses the attacker's
    trust, envelope = _files(tmp_path, honest, _signed(ALICE))
    assert _verify(cli, trust, envelope).code == 0
    trust, envelope = _files(tmp_path, honest, _signed(MALLORY))
    refused = _verify(cli, trust, envelope)
    assert refused.code == 1 and "not signed by a trusted key" in flat(refused.out)


def test_one_key_listed_twice_is_refused(tmp_path: Path, cli) -> None:
    doc = _trust(ALICE)
    trust, envelope = _files(tmp_path, {"keys": doc["keys"] * 2}, _signed(ALICE))
    r = _verify(cli, trust, envelope)
    assert r.code == 2 and "twice" in r.err


def test_the_threshold_needs_that_many_distinct_trusted_keys(tmp_path: Path, cli) -> None:
    two = _trust(ALICE, BOB, threshold=2)
    trust, envelope = _files(tmp_path, two, _signed(ALICE))
    one = _verify(cli, trust, envelope)
    assert one.code == 1 and "not signed by 2 distinct trusted keys" in flat(one.out), one.out
    # one key's signature twice does not count twice (securesystemslib refuses such an
    # envelope outright: bad input)
    doubled = _signed(ALICE)
    doubled["signatures"] = doubled["signatures"] * 2
    trust, envelope = _files(tmp_path, two, doubled)
    twice = _verify(cli, trust, envelope)
    assert twice.code == 2 and "not a DSSE envelope" in twice.err
    # a stranger's signature beside one trusted key's does not count either
    trust, envelope = _files(tmp_path, two, _signed(ALICE, MALLORY))
    assert _verify(cli, trust, envelope).code == 1
    trust, envelope = _files(tmp_path, two, _signed(ALICE, BOB))
    both = _verify(cli, trust, envelope)
    assert both.code == 0, both.out + both.err


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"threshold": 3}, "threshold of '3'"),
        ({"threshold": 0}, "threshold of '0'"),
        ({"threshold": "2"}, "threshold of '2'"),
        ({"threshold": True}, "threshold of 'True'"),
        ({"roles": {"root": {}}}, "does not support"),
        ({"expires": "2030-01-01"}, "does not support"),
    ],
)
def test_a_trust_file_asking_for_what_is_not_supported_is_bad_input(
    tmp_path: Path, cli, extra: dict, message: str
) -> None:
    trust, envelope = _files(tmp_path, _trust(ALICE, BOB, **extra), _signed(ALICE, BOB))
    r = _verify(cli, trust, envelope)
    assert r.code == 2 and message in flat(r.err), r.err


def test_files_others_can_write_are_refused(tmp_path: Path, cli) -> None:
    trust, envelope = _files(tmp_path, _trust(ALICE), _signed(ALICE))
    assert _verify(cli, trust, envelope).code == 0
    for path in (trust, envelope):
        path.chmod(0o666)
        r = _verify(cli, trust, envelope)
        assert r.code == 2 and "writable by others (mode 0666)" in flat(r.err), r.err
        path.chmod(0o644)
    # the folder that holds them
    trust.parent.chmod(0o777)
    r = _verify(cli, trust, envelope)
    assert r.code == 2 and "the folder" in flat(r.err) and "0777" in flat(r.err)
    # a sticky folder (as /tmp is) cannot have its entries replaced by others
    trust.parent.chmod(0o1777)
    assert _verify(cli, trust, envelope).code == 0
    trust.parent.chmod(0o755)


def test_symlinks_are_resolved_and_checked(tmp_path: Path, cli) -> None:
    trust, envelope = _files(tmp_path, _trust(ALICE), _signed(ALICE))
    # a link to a file others can write
    open_folder = tmp_path / "shared"
    open_folder.mkdir()
    target = open_folder / "trust.json"
    target.write_text(trust.read_text())
    target.chmod(0o666)
    link = tmp_path / "in" / "link.json"
    link.symlink_to(target)
    r = _verify(cli, link, envelope)
    assert r.code == 2 and str(target) in flat(r.err) and "0666" in r.err, r.err
    # a good file reached through a link in a folder others can write (the link can be
    # swapped)
    target.chmod(0o644)
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    (loose / "trust.json").symlink_to(trust)
    r = _verify(cli, loose / "trust.json", envelope)
    assert r.code == 2 and "folder of the link" in flat(r.err), r.err
    # a link kept as tightly as its target holds
    tight = tmp_path / "in" / "tight.json"
    tight.symlink_to(trust)
    assert _verify(cli, tight, envelope).code == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_trust_file_owned_by_another_user_is_refused(tmp_path: Path, cli) -> None:
    trust, envelope = _files(tmp_path, _trust(ALICE), _signed(ALICE))
    os.chown(trust, 65534, 65534)
    r = _verify(cli, trust, envelope)
    assert r.code == 2 and "owned by uid 65534" in flat(r.err)


def test_the_payload_is_parsed_only_after_its_signature(tmp_path: Path, cli) -> None:
    """Not JSON, signed by a stranger: a signature failure, never a parse."""
    from securesystemslib.dsse import Envelope

    env = Envelope(payload=b"{" * 10, payload_type="application/vnd.in-toto+json",
                   signatures={})  # fmt: skip
    env.sign(MALLORY)
    trust, envelope = _files(tmp_path, _trust(ALICE), env.to_dict())
    r = _verify(cli, trust, envelope, "--json")
    assert r.code == 1 and r.json()["reasons"] == [
        f"the attestation {envelope} is not signed by a trusted key"
    ]


@pytest.mark.parametrize("what", ["trust", "envelope", "payload", "revocations"])
def test_deep_nesting_is_one_paragraph_never_a_traceback(tmp_path: Path, cli, what: str) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    good_trust, good_envelope = _trust(ALICE), _signed(ALICE)
    trust, envelope = _files(tmp_path, good_trust, good_envelope)
    more: list[str] = []
    if what == "trust":
        trust.write_text(deep)
    elif what == "envelope":
        envelope.write_text(deep)
    elif what == "payload":
        from securesystemslib.dsse import Envelope

        env = Envelope(payload=deep.encode(), payload_type="application/vnd.in-toto+json",
                       signatures={})  # fmt: skip
        env.sign(ALICE)  # trusted: only now is the payload parsed, within bounds
        envelope.write_text(json.dumps(env.to_dict()))
    else:
        revocations = tmp_path / "in" / "revocations.json"
        revocations.write_text(deep)
        more = ["--revocations", str(revocations)]
    r = _verify(cli, trust, envelope, *more)
    assert r.code == 2, r.out + r.err
    assert "nested" in r.err and "Traceback" not in r.err + r.out


def test_a_tampered_payload_names_no_reason_from_its_content(tmp_path: Path, cli) -> None:
    """Rewritten after signing with ESC sequences: refused, and nothing from it printed."""
    envelope = _signed(ALICE)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["verdict"] = "\x1b]52;c;ZXZpbA==\x07\x1b[2Kpass\u202e"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    trust, path = _files(tmp_path, _trust(ALICE), envelope)
    r = _verify(cli, trust, path)
    assert r.code == 1 and "\x1b" not in r.out and "\u202e" not in r.out
