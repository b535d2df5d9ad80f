"""JUnit XML for CI (``--junit FILE``) of the controller's judging commands, beside
``imagectl validate --junit`` (``imagectl.validators.report``):

- ``imagectl lint``: one test case per stack (classname ``lint``); a broken rule is a
  ``failure`` listing every error with its rule, place, fix and source, a malformed stack
  file (SCHEMA) an ``error``; warnings go to ``system-out``.
- ``imagectl validate-image``: a suite ``imagectl.validate-image`` with the decision and a
  test case per host (a host without a receipt is an ``error`` naming its problem), then
  every host's receipt as its own suite (``imagectl.validate.<host>``), check by check.

Files are written whole or not at all (``imagectl.core.fsutil.atomic_write``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from imagectl.core.fsutil import atomic_write
from imagectl.lint import Problem, StackReport
from imagectl.validators.receipt import Receipt
from imagectl.validators.report import junit_document, junit_suite


def _problem(p: Problem) -> str:
    text = f"{p.severity} {p.rule} {p.where}: {p.message}"
    if p.fix:
        text += f"\n  fix: {p.fix}"
    if p.source:
        text += f"\n  source: {p.source}"
    return text


def lint_junit(reports: Sequence[StackReport]) -> str:
    errors = [r for r in reports if any(p.severity == "error" for p in r.problems)]
    schema = [r for r in errors if any(p.rule == "SCHEMA" for p in r.problems)]
    suite = ET.Element(
        "testsuite",
        name="imagectl.lint",
        tests=str(len(reports)),
        failures=str(len(errors) - len(schema)),
        errors=str(len(schema)),
        skipped="0",
    )
    for r in reports:
        case = ET.SubElement(suite, "testcase", classname="lint", name=r.stack, file=r.path)
        bad = [p for p in r.problems if p.severity == "error"]
        warn = [p for p in r.problems if p.severity != "error"]
        if bad:
            tag = "error" if any(p.rule == "SCHEMA" for p in bad) else "failure"
            rules = ", ".join(dict.fromkeys(p.rule for p in bad))
            node = ET.SubElement(case, tag, message=f"{len(bad)} error(s): {rules}", type=tag)
            node.text = "\n".join(_problem(p) for p in bad)
        if warn:
            ET.SubElement(case, "system-out").text = "\n".join(_problem(p) for p in warn)
    return junit_document([suite])


def validate_image_junit(payload: Mapping[str, Any], receipts: Mapping[str, Receipt]) -> str:
    """``payload``: validate-image's result (its ``--json``); ``receipts``: host -> the
    receipt it returned."""
    hosts = list(payload.get("hosts") or [])
    failed = [h for h in hosts if h.get("verdict") == "fail"]
    missing = [h for h in hosts if h.get("verdict") is None]
    validated = payload.get("state") == "validated"
    suite = ET.Element(
        "testsuite",
        name="imagectl.validate-image",
        tests=str(len(hosts) + 1),
        failures=str(len(failed) + (0 if validated else 1)),
        errors=str(len(missing)),
        skipped="0",
    )
    props = ET.SubElement(suite, "properties")
    for key in ("image_id", "cloud", "stack", "shape", "state", "receipts"):
        ET.SubElement(props, "property", name=key, value=str(payload.get(key)))
    decision = ET.SubElement(suite, "testcase", classname="validate-image", name="decision")
    if not validated:
        reasons = "; ".join(payload.get("reasons") or []) or str(payload.get("state"))
        ET.SubElement(
            decision, "failure", message=f"{payload.get('state')}: {reasons}", type="decision"
        ).text = reasons
    for h in hosts:
        case = ET.SubElement(suite, "testcase", classname="validate-image.host", name=h["host"])
        if h.get("verdict") is None:
            ET.SubElement(
                case, "error", message=h.get("problem") or "no receipt", type="host"
            ).text = h.get("problem") or ""
        elif h["verdict"] == "fail":
            checks = ", ".join(h.get("failed_checks") or [])
            ET.SubElement(
                case, "failure", message=f"failed: {checks}", type=h.get("worst_action") or ""
            ).text = checks
    per_host = [
        junit_suite(receipts[h["host"]], name=f"imagectl.validate.{h['host']}")
        for h in hosts
        if h["host"] in receipts
    ]
    return junit_document([suite, *per_host])


def write(path: Path, text: str) -> Path:
    return atomic_write(path, text)
