"""The consumer-side check: the boot unit's ``imagectl verify-node`` on a fleet node.

The unit is rendered by Ansible from the validator role with
``validator_require_attestation`` on, and its ``ExecStartPre`` command line is run as
systemd would run it, against files as a deploy system places them: the envelope the
controller signed (``sign_statement``, the production path), the trust file the build
writes, the node's own manifest (written by the manifest role's real
``write-manifest.py``, with the build id and nonce) and the image id the instance
metadata reports (``--image-id``, as ``validators.host.metadata`` reads it). Each attack
must fail the unit: another build's envelope on this node, an envelope for another image
id, a tampered envelope, another key's signature, a statement that says pass while one
of its receipts failed, a revoked image, and a revocation list that is missing, older
than one the node kept, expired, or unsigned as a whole (exit 1); an empty, foreign or
bent trust file (a key id not computed from its key, one key id twice, a threshold it
cannot meet, writable by others or a symlink to such a file) and a missing envelope are
bad input (exit 2).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from imagectl.promotion.revoke import revocation_statement
from imagectl.provenance.attest import envelope_digest, sign_statement
from imagectl.provenance.keys import trust_document
from imagectl.provenance.revocations import list_envelope
from imagectl.provenance.statement import build_statement
from tests.support import bare, flat, require_tool

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "playbooks" / "roles" / "validator"
UNIT = ROLE / "templates/etc/systemd/system/imagectl-boot-validate.service.j2"


def _render(tmp_path: Path, **extra: str) -> list[str]:
    playbook = require_tool("ansible-playbook")
    play, unit = tmp_path / "render.yml", tmp_path / "boot.service"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n"
        f"  vars_files: [{ROLE / 'defaults' / 'main.yml'}]\n"
        "  tasks:\n    - ansible.builtin.template:\n"
        f"        src: {UNIT}\n        dest: {unit}\n"
    )
    extra_args = [a for k, v in extra.items() for a in ("-e", f"{k}={v}")]
    proc = subprocess.run(
        [playbook, "-i", "localhost,", "-c",
         "local", "-e", f"ansible_python_interpreter={sys.executable}", *extra_args, str(play)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return unit.read_text().splitlines()


SIGNER = CryptoSigner.generate_ed25519()  # the controller's key, trusted by the image
WRITER = REPO / "playbooks" / "roles" / "manifest" / "files" / "write-manifest.py"
AMI = "ami-0123456789abcdef0"


def _manifest(path: Path, build_id: str, nonce: str) -> bytes:
    """The manifest role's own writer, as the build runs it (ground truth of this host;
    a host without kmod's ``modinfo`` answers as one without the nvidia module)."""
    env = dict(os.environ)
    if shutil.which("modinfo") is None:
        stub = path.parent / "bin"
        stub.mkdir(exist_ok=True)
        (stub / "modinfo").write_text(
            "#!/bin/sh\necho 'modinfo: ERROR: Module nvidia not found.' >&2\nexit 1\n"
        )
        (stub / "modinfo").chmod(0o755)
        env["PATH"] = f"{stub}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [sys.executable, str(WRITER), "--stack", "h100-training", "--digest", "ab" * 32,
         "--cloud", "aws", "--kernel", "6.8.0-1015-aws", "--build-id", build_id,
         "--nonce", nonce],
        capture_output=True, text=True, timeout=60, check=True, env=env,
    )  # fmt: skip
    path.write_text(proc.stdout + "\n")
    return path.read_bytes()


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    etc = tmp_path / "etc"
    etc.mkdir()
    manifest = etc / "manifest.json"
    _manifest(manifest, "20261125-000000-aaaaaa", "11" * 16)
    (etc / "attestation-trust.json").write_text(trust_document([SIGNER.public_key]))
    envelope = sign_statement(_statement(manifest.read_bytes()), SIGNER)
    (etc / "attestation.dsse.json").write_text(json.dumps(envelope))
    _place_list(etc / "attestation-revocations.json", [], version=5)
    return {
        "etc": etc,
        "manifest": manifest,
        "envelope": etc / "attestation.dsse.json",
        "trust": etc / "attestation-trust.json",
        "revocations": etc / "attestation-revocations.json",
        "seen": tmp_path / "state" / "revocations-seen.json",
    }


def _place_list(
    path: Path, entries: list, *, version: int, expires_in_h: float = 24.0,
    signers: list | None = None,
) -> dict:  # fmt: skip
    """A signed revocation list as the controller publishes it (``list_envelope``)."""
    doc = list_envelope(
        entries, version=version,
        expires=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=expires_in_h),
        signers=signers or [SIGNER],
    )  # fmt: skip
    path.write_text(json.dumps(doc))
    return doc


def _statement(
    manifest: bytes, verdict: str = "pass", receipt_verdict: str | None = None,
    image_id: str = AMI,
) -> dict:  # fmt: skip
    return build_statement(
        cloud="aws",
        region="us-east-1",
        cloud_image_id=image_id,
        stack="h100-training",
        stack_digest="ab" * 32,
        manifest_sha256=hashlib.sha256(manifest).hexdigest(),  # the build folder's copy
        build_id="20261125-000000-aaaaaa",
        receipts=[
            {
                "verdict": receipt_verdict or verdict,
                "image_id": image_id,
                "host": {"hostname": "gpu-1"},
            }
        ],
        verdict=verdict,
        attested_by="ci",
        attested_at="2026-11-25T00:00:00+00:00",
        copies=[("us-west-2", "ami-0fedcba9876543210")],
    )


def _pre_start(tmp_path: Path, node: dict[str, Path], image_id: str = AMI) -> list[str]:
    lines = _render(
        tmp_path,
        validator_require_attestation="true",
        validator_attestation_file=str(node["envelope"]),
        validator_attestation_trust_file=str(node["trust"]),
        validator_attestation_revocations_file=str(node["revocations"]),
        validator_revocations_state_file=str(node["seen"]),
        manifest_file=str(node["manifest"]),
    )
    (line,) = [ln for ln in lines if ln.startswith("ExecStartPre=") and "verify-node" in ln]
    argv = line.removeprefix("ExecStartPre=").split()
    assert argv[0] == "/opt/imagectl/bin/imagectl"
    # on a cloud the image id comes from the instance metadata; here it is given
    return [str(Path(sys.executable).with_name("imagectl")), *argv[1:], "--image-id", image_id]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_without_the_option_the_unit_does_not_check(tmp_path: Path) -> None:
    assert not any("verify-node" in ln for ln in _render(tmp_path))


def test_two_builds_never_share_a_manifest(tmp_path: Path) -> None:
    """Same stack, same host: the build id and nonce make the manifests differ."""
    a = _manifest(tmp_path / "a.json", "20261125-000000-aaaaaa", "11" * 16)
    b = _manifest(tmp_path / "b.json", "20261125-000001-bbbbbb", "22" * 16)
    assert a != b
    assert json.loads(a)["build_id"] == "20261125-000000-aaaaaa"
    assert json.loads(b)["nonce"] == "22" * 16


def test_the_unit_passes_an_attested_node_and_fails_every_forgery(
    tmp_path: Path, node: dict[str, Path]
) -> None:
    argv = _pre_start(tmp_path, node)
    ok = _run(argv)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # bare: the console folds a path longer than its width (a long TMPDIR) mid-word
    assert bare(ok.stdout).startswith(bare(f"attested: {node['envelope']} holds for")), ok.stdout
    # a promoted copy in another region is named by the statement the promotion signed
    copy = _run(_pre_start(tmp_path, node, "ami-0fedcba9876543210"))
    assert copy.returncode == 0, copy.stdout + copy.stderr

    # another build of the same stack booted: build A's envelope must not hold on it
    original = node["manifest"].read_bytes()
    _manifest(node["manifest"], "20261125-000001-bbbbbb", "22" * 16)
    other = _run(argv)
    assert other.returncode == 1 and "attests another image" in flat(other.stdout), other.stdout
    node["manifest"].write_bytes(original)

    # an instance booted from another image id (metadata says so)
    elsewhere = _run(_pre_start(tmp_path, node, "ami-00000000000000bad"))
    assert elsewhere.returncode == 1
    assert "not this node's image ami-00000000000000bad" in flat(elsewhere.stdout)

    # a tampered payload: rewritten after signing
    envelope = json.loads(node["envelope"].read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["attested_by"] = "mallory"
    forged = {**envelope, "payload": base64.b64encode(json.dumps(statement).encode()).decode()}
    node["envelope"].write_text(json.dumps(forged))
    tampered = _run(argv)
    assert tampered.returncode == 1 and "not signed by a trusted key" in flat(tampered.stdout)

    # a signature by a key the image does not trust
    stranger = CryptoSigner.generate_ed25519()
    node["envelope"].write_text(
        json.dumps(sign_statement(_statement(node["manifest"].read_bytes()), stranger))
    )
    assert _run(argv).returncode == 1

    # a failing verdict, signed by the trusted key, is no attestation of health
    failing = sign_statement(_statement(node["manifest"].read_bytes(), "fail"), SIGNER)
    node["envelope"].write_text(json.dumps(failing))
    verdict = _run(argv)
    assert verdict.returncode == 1 and "not pass" in flat(verdict.stdout)

    # a statement that says pass while one of its own receipts failed: judged whole
    contradicting = sign_statement(
        _statement(node["manifest"].read_bytes(), "pass", receipt_verdict="fail"), SIGNER
    )
    node["envelope"].write_text(json.dumps(contradicting))
    whole = _run(argv)
    assert whole.returncode == 1 and "yet the statement says pass" in flat(whole.stdout)

    node["envelope"].unlink()
    missing = _run(argv)
    assert missing.returncode == 2 and "cannot read the attestation" in flat(missing.stderr)


def test_verify_node_json_says_the_same_verdict_as_data(
    tmp_path: Path, node: dict[str, Path]
) -> None:
    """``verify-node --json``: one JSON document with the verdict and its reasons (what a
    fleet agent reads), where the plain run prints the sentence; the exit code the same."""
    imagectl = str(Path(sys.executable).with_name("imagectl"))
    files = ["--envelope", str(node["envelope"]), "--trust", str(node["trust"]),
             "--manifest", str(node["manifest"]), "--revocations", str(node["revocations"]),
             "--revocations-state", str(node["seen"])]  # fmt: skip
    plain = _run([imagectl, "verify-node", *files, "--image-id", AMI])
    assert plain.returncode == 0 and plain.stdout.startswith("attested:"), plain.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(plain.stdout)
    ok = _run([imagectl, "verify-node", *files, "--image-id", AMI, "--json"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout) == {
        "valid": True, "reasons": [], "envelope": str(node["envelope"]), "image_id": AMI,
    }  # fmt: skip
    bad = _run([imagectl, "verify-node", *files, "--image-id", "ami-00000000000000bad", "--json"])
    doc = json.loads(bad.stdout)
    assert bad.returncode == 1 and doc["valid"] is False and doc["image_id"] != AMI
    assert any("not this node's image" in r for r in doc["reasons"]), doc


def test_a_revoked_image_fails_the_unit(tmp_path: Path, node: dict[str, Path]) -> None:
    argv = _pre_start(tmp_path, node)
    envelope = json.loads(node["envelope"].read_text())

    def revocation(signer: CryptoSigner) -> dict:
        return sign_statement(
            revocation_statement(
                attestation=envelope_digest(envelope), images=[f"image:aws/us-east-1/{AMI}"],
                reason="recalled: bad NCCL", actor="ops", at="2026-11-26T00:00:00+00:00",
            ),
            signer,
        )  # fmt: skip

    # a revocation by a key the image does not trust is ignored (anyone can write one)
    _place_list(node["revocations"], [revocation(CryptoSigner.generate_ed25519())], version=6)
    assert _run(argv).returncode == 0
    trusted = _place_list(node["revocations"], [revocation(SIGNER)], version=7)
    revoked = _run(argv)
    assert revoked.returncode == 1 and "recalled: bad NCCL" in flat(revoked.stdout), revoked.stdout
    # refused for the revocation, not because signature checking refuses everything
    assert "not signed by" not in flat(revoked.stdout)
    assert json.loads(node["seen"].read_text())["version"] == 7  # the node kept it

    # the same list unsigned as a whole (the old form): one entry could be dropped unseen
    node["revocations"].write_text(json.dumps({"revocations": []}))
    unsigned = _run(argv)
    assert unsigned.returncode == 1 and "unsigned list" in flat(unsigned.stdout)

    # an entry dropped from the signed list: its signature no longer holds
    body = json.loads(base64.b64decode(trusted["payload"]))
    body["revocations"] = []
    dropped = {**trusted, "payload": base64.b64encode(json.dumps(body).encode()).decode()}
    node["revocations"].write_text(json.dumps(dropped))
    r = _run(argv)
    assert r.returncode == 1 and "not signed by a trusted key" in flat(r.stdout), r.stdout

    # an older list, genuinely signed, without the revocation (rollback)
    _place_list(node["revocations"], [], version=6)
    rollback = _run(argv)
    assert rollback.returncode == 1 and "older than version 7" in flat(rollback.stdout)
    assert "rollback" in flat(rollback.stdout)

    # a newer list past its expiry (freeze)
    _place_list(node["revocations"], [], version=9, expires_in_h=-1)
    frozen = _run(argv)
    assert (
        frozen.returncode == 1
        and "expired" in flat(frozen.stdout)
        and "freeze" in flat(frozen.stdout)
    )

    # a list signed by a key the image does not trust
    _place_list(node["revocations"], [], version=10, signers=[CryptoSigner.generate_ed25519()])
    assert _run(argv).returncode == 1


def test_a_node_without_the_revocation_list_fails_closed(
    tmp_path: Path, node: dict[str, Path]
) -> None:
    argv = _pre_start(tmp_path, node)
    assert _run(argv).returncode == 0
    node["revocations"].unlink()
    r = _run(argv)
    assert r.returncode == 1 and "no revocation list" in flat(r.stdout), r.stdout
    assert "fails closed" in flat(r.stdout)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "is empty"),
        ('{"keys": []}', "lists no key"),
        ('{"payload": "x"}', "not a trust document"),
    ],
)
def test_an_empty_or_foreign_trust_file_is_bad_input(
    tmp_path: Path, node: dict[str, Path], content: str, message: str
) -> None:
    node["trust"].write_text(content)
    r = _run(_pre_start(tmp_path, node))
    assert r.returncode == 2 and message in flat(r.stderr), r.stderr
    assert "Traceback" not in flat(r.stderr)
