"""Every output writer with the same hostile strings.

Text from a statement, a host, an image or a cloud reaches four kinds of reader: a
terminal (``verify``, ``verify-node``), Markdown (the pull-request comment), JUnit XML
(CI) and Prometheus (the node exporter). Each string below is one a terminal or a
reader acts on: ECMA-48 CSI erase-line and cursor-up, an OSC 52 clipboard write, an
OSC 8 hyperlink, the 8-bit CSI, bidi overrides and isolates (Trojan Source,
CVE-2021-42574), C0 controls that XML 1.0 cannot carry at all (its ``Char`` production
allows only tab, line feed and carriage return), DEL and U+FFFE. Each writer must give a
document its reader accepts with none of them left in it.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from imagectl.core.safetext import md_cell
from imagectl.lint import Problem, StackReport
from imagectl.provenance.attest import sign_statement
from imagectl.provenance.keys import trust_document
from imagectl.provenance.statement import build_statement
from tests.support import make_receipt

HOSTILE = [
    "\x1b[2K\x1b[1Aerased the line above",
    "\x1b]52;c;ZXZpbA==\x07clipboard",
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "\x9b2Jeight-bit CSI",
    "\u202eevil\u202c \u2066isolate\u2069 \u200fmark",
    "nul\x00 bel\x07 bs\x08 vt\x0b ff\x0c so\x0e esc-less\x1f",
    "del\x7f nonchar\ufffe",
]
JOINED = " | ".join(HOSTILE)
# what none of the outputs may hold (tab and line feed are text)
FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff]"
)


def _clean(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(text)})
    assert not found, f"left in the output: {found}"


def _receipt():
    return make_receipt(
        "ami-0123456789abcdef0", "h100-training", "ab" * 32, verdict="fail",
        worst_action="DRAIN", host=JOINED,
        checks=[{"id": "sw.driver.version", "title": JOINED, "severity": "critical",
                 "outcome": "fail", "action": "DRAIN", "message": JOINED}],
    )  # fmt: skip


def test_junit_xml_is_valid_and_inert() -> None:
    from imagectl.junit import lint_junit, validate_image_junit

    receipt = _receipt()
    documents = [
        validate_image_junit(
            {
                "state": "blocked",
                "reasons": HOSTILE,
                "image_id": JOINED,
                "cloud": "aws",
                "hosts": [
                    {
                        "host": "h-1",
                        "verdict": "fail",
                        "failed_checks": HOSTILE,
                        "worst_action": JOINED,
                    },
                    {"host": "h-2", "verdict": None, "problem": JOINED},
                ],
            },
            {"h-1": receipt},
        ),
        lint_junit(
            [
                StackReport(
                    JOINED, JOINED, None, [Problem("R1", "error", JOINED, JOINED, JOINED, JOINED)]
                )
            ]
        ),
    ]
    for doc in documents:
        ET.fromstring(doc.encode())  # XML 1.0 well-formed
        _clean(doc)
        assert "clipboard" in doc and "erased the line above" in doc  # the words stay


def test_prometheus_labels_are_inert_and_parse() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from imagectl.validators.prometheus import render

    receipt = _receipt().model_copy(update={"image_id": JOINED, "stack": JOINED})
    text = render(receipt)
    _clean(text.replace("\n", ""))
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    labelled = [s for s in samples if "image_id" in s.labels]  # the info series
    assert labelled and all("erased the line above" in s.labels["image_id"] for s in labelled)


def test_markdown_cells_are_inert() -> None:
    for value in HOSTILE:
        _clean(md_cell(value))


def test_terminal_verify_and_verify_node_are_inert(tmp_path: Path, cli, monkeypatch) -> None:
    """A statement signed by the trusted key whose receipts carry hostile text (a host
    wrote them): verify's and verify-node's reasons quote it inert."""
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "state"))
    signer = CryptoSigner.generate_ed25519()
    statement = build_statement(
        cloud="aws", region="us-east-1", cloud_image_id="ami-0123456789abcdef0",
        stack="h100-training", stack_digest="ab" * 32, manifest_sha256="cd" * 32,
        build_id="b-1", verdict="pass", attested_by=JOINED, attested_at=JOINED,
        receipts=[{"verdict": JOINED, "image_id": JOINED, "host": {"hostname": JOINED}}],
    )  # fmt: skip
    envelope, trust = tmp_path / "env.json", tmp_path / "trust.json"
    envelope.write_text(json.dumps(sign_statement(statement, signer)))
    trust.write_text(trust_document([signer.public_key]))
    for image in ("ami-0123456789abcdef0", JOINED):
        r = cli("verify", image, "--envelope", str(envelope), "--trust", str(trust))
        assert r.code == 1
        assert "erased the line above" in r.out  # the reason quotes the host's words
        _clean(r.out.replace("\n", "") + r.err.replace("\n", ""))
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    (tmp_path / "rev.json").write_text("{}")
    r = cli("verify-node", "--envelope", str(envelope), "--trust", str(trust), "--manifest",
            str(manifest), "--revocations", str(tmp_path / "none.json"),
            "--revocations-state", str(tmp_path / "seen.json"), "--image-id", JOINED)  # fmt: skip
    assert r.code == 1 and "clipboard" in r.out
    _clean(r.out.replace("\n", "") + r.err.replace("\n", ""))


@pytest.mark.parametrize("value", HOSTILE)
def test_every_hostile_string_is_covered_by_the_one_sanitizer(value: str) -> None:
    from imagectl.core.safetext import plain, prom_label, xml_text

    for out in (plain(value), xml_text(value), prom_label(value)):
        _clean(out)
