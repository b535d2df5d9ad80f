"""The consumer-side check: the boot unit's ``imagectl verify-node`` on a fleet node.

The unit is rendered by Ansible from the validator role with
``validator_require_attestation`` on, and its ``ExecStartPre`` command line is run as
systemd would run it, against files as a deploy system places them: the envelope the
controller signed (``sign_statement``, the production path), the trust file the build
writes, and the node's own manifest. A node whose image is not the attested one, a
tampered envelope or another key's signature must fail the unit (exit 1).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import trust_document
from imagectl.provenance.statement import build_statement
from tests.support import require_tool

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


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    etc = tmp_path / "etc"
    etc.mkdir()
    manifest = etc / "manifest.json"
    manifest.write_text(json.dumps({"stack": "h100-training", "driver": "580.95.05"}) + "\n")
    (etc / "attestation-trust.json").write_text(trust_document([SIGNER.public_key]))
    envelope = sign_statement(_statement(manifest.read_bytes()), SIGNER)
    (etc / "attestation.dsse.json").write_text(json.dumps(envelope))
    return {
        "etc": etc,
        "manifest": manifest,
        "envelope": etc / "attestation.dsse.json",
        "trust": etc / "attestation-trust.json",
    }


def _statement(manifest: bytes, verdict: str = "pass") -> dict:
    return build_statement(
        cloud="aws",
        region="us-east-1",
        cloud_image_id="ami-0123456789abcdef0",
        stack="h100-training",
        stack_digest="ab" * 32,
        receipts=[
            {"verdict": verdict, "host": {"manifest_sha256": hashlib.sha256(manifest).hexdigest()}}
        ],
        verdict=verdict,
        attested_by="ci",
        attested_at="2026-11-25T00:00:00+00:00",
    )


def _pre_start(tmp_path: Path, node: dict[str, Path]) -> list[str]:
    lines = _render(
        tmp_path,
        validator_require_attestation="true",
        validator_attestation_file=str(node["envelope"]),
        validator_attestation_trust_file=str(node["trust"]),
        manifest_file=str(node["manifest"]),
    )
    (line,) = [ln for ln in lines if ln.startswith("ExecStartPre=") and "verify-node" in ln]
    argv = line.removeprefix("ExecStartPre=").split()
    assert argv[0] == "/opt/imagectl/bin/imagectl"
    return [str(Path(sys.executable).with_name("imagectl")), *argv[1:]]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_without_the_option_the_unit_does_not_check(tmp_path: Path) -> None:
    assert not any("verify-node" in ln for ln in _render(tmp_path))


def test_the_unit_passes_an_attested_node_and_fails_every_forgery(
    tmp_path: Path, node: dict[str, Path]
) -> None:
    argv = _pre_start(tmp_path, node)
    ok = _run(argv)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # another image: the node's manifest is not the attested one
    original = node["manifest"].read_text()
    node["manifest"].write_text(original.replace("580.95.05", "580.82.07"))
    other = _run(argv)
    assert other.returncode == 1 and "attests another image" in other.stdout
    node["manifest"].write_text(original)

    # a tampered payload: the verdict rewritten after signing
    envelope = json.loads(node["envelope"].read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["attested_by"] = "mallory"
    forged = {**envelope, "payload": base64.b64encode(json.dumps(statement).encode()).decode()}
    node["envelope"].write_text(json.dumps(forged))
    tampered = _run(argv)
    assert tampered.returncode == 1 and "not signed by a trusted key" in tampered.stdout

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
    assert verdict.returncode == 1 and "not pass" in verdict.stdout

    node["envelope"].unlink()
    missing = _run(argv)
    assert missing.returncode == 2 and "cannot read the attestation" in missing.stderr
