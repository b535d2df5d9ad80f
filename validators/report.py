"""Human and CI views of a receipt: a rich table, JUnit XML, and a diff of two receipts."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from imagectl.core.fsutil import atomic_write
from imagectl.core.safetext import cell, markup, xml_text
from imagectl.validators.receipt import Receipt
from imagectl.validators.results import Action, CheckResult, Outcome

_STYLE = {
    Outcome.PASS: "green",
    Outcome.FAIL: "bold red",
    Outcome.ERROR: "bold magenta",
    Outcome.WARN: "yellow",
    Outcome.SKIP: "dim",
}


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict | list):
        text = (
            ", ".join(f"{k}={v}" for k, v in value.items())
            if isinstance(value, dict)
            else ", ".join(map(str, value))
        )
        return text if len(text) <= 48 else text[:45] + "..."
    return str(value)


def _grouped(checks: list[CheckResult], show_passed: bool) -> list[tuple[CheckResult, str, float]]:
    """Rows with the same check, outcome, measurement and message on several GPUs -> one row."""

    def key(c: CheckResult) -> tuple[object, ...]:
        return (c.id, c.outcome, c.action, repr(c.measured), c.message)

    rows: list[tuple[CheckResult, list[int], float]] = []
    for c in checks:
        if not show_passed and c.outcome is Outcome.PASS:
            continue
        last = rows[-1] if rows else None
        if last is not None and c.gpu is not None and last[1] and key(last[0]) == key(c):
            last[1].append(c.gpu)
            rows[-1] = (last[0], last[1], last[2] + c.duration_s)
            continue
        rows.append((c, [] if c.gpu is None else [c.gpu], c.duration_s))
    return [(c, _gpu_list(g), t) for c, g, t in rows]


def _root_causes(checks: list[CheckResult]) -> dict[str, list[CheckResult]]:
    """Checks not run because another check failed (``details.root_cause`` naming a check
    of this receipt that did not pass, e.g. every NVML check when ``nvml.init`` fails),
    by that check: the table shows them as one row under it, not one row each with the
    same reason. The receipt keeps every result."""
    failed = {c.id for c in checks if c.outcome in (Outcome.FAIL, Outcome.ERROR)}
    by_root: dict[str, list[CheckResult]] = {}
    for c in checks:
        root = c.details.get("root_cause")
        if (
            isinstance(root, str)
            and root in failed
            and root != c.id
            and c.outcome is not Outcome.PASS
        ):
            by_root.setdefault(root, []).append(c)
    return {root: deps for root, deps in by_root.items() if len(deps) > 1}


def _root_cause_row(root: str, deps: list[CheckResult]) -> dict[str, Any]:
    ids = list(dict.fromkeys(c.id for c in deps))
    gpus = sorted({c.gpu for c in deps if c.gpu is not None})
    outcomes = {c.outcome for c in deps}
    worst = next((o for o in (Outcome.ERROR, Outcome.FAIL) if o in outcomes), deps[0].outcome)
    return {
        "check": cell(f"{len(ids)} checks"),
        "gpu": cell(_gpu_list(gpus)),
        "outcome": Text(worst.value, style=_STYLE[worst]),
        "measured": cell(""),
        "expected": cell(""),
        "action": cell(Action.worst([c.action for c in deps]).value),
        "time": cell(f"{sum(c.duration_s for c in deps) * 1000:.0f} ms"),
        "message": cell(f"{len(ids)} checks not run: {root} failed (above): {', '.join(ids)}"),
    }


def _gpu_list(gpus: list[int]) -> str:
    if not gpus:
        return ""
    if len(gpus) > 2 and gpus == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(map(str, gpus))


def _action(c: CheckResult) -> str:
    return "" if c.action is Action.NONE else c.action.value


def render_table(receipt: Receipt, *, console: Any, show_passed: bool = True) -> None:
    table = Table(title=cell(f"imagectl validate --profile {receipt.profile}"), show_lines=False)
    wide = getattr(console, "width", 80) >= 120
    cols = ["check", "gpu", "outcome", "measured", "expected", "action", "time", "message"]
    if not wide:  # narrow terminals: what and what to do; --json has the rest
        cols = ["check", "gpu", "outcome", "action", "message"]
    for col in cols:
        table.add_column(
            col,
            no_wrap=col in ("check", "gpu", "outcome", "action", "time"),
            overflow="fold" if col == "message" else "ellipsis",
            max_width=28 if col in ("measured", "expected") else None,
            ratio=3 if col == "message" else None,
            min_width=24 if col == "message" else None,
        )
    folded = _root_causes(receipt.checks)
    hidden_ids = {id(c) for deps in folded.values() for c in deps}
    shown = [c for c in receipt.checks if id(c) not in hidden_ids]
    for c, gpus, total_s in _grouped(shown, show_passed):
        unit = f" {c.unit}" if c.unit and c.measured is not None else ""
        cells = {  # what the host wrote is shown literally (imagectl.core.safetext)
            "check": cell(c.id),
            "gpu": cell(gpus),
            "outcome": Text(c.outcome.value, style=_STYLE[c.outcome]),
            "measured": cell(_fmt(c.measured) + unit),
            "expected": cell(_fmt(c.expected)),
            "action": cell(_action(c)),
            "time": cell(f"{total_s * 1000:.0f} ms"),
            "message": cell(c.message),
        }
        table.add_row(*(cells[col] for col in cols))
        if c.id in folded:
            summary = _root_cause_row(c.id, folded.pop(c.id))
            table.add_row(*(summary[col] for col in cols))
    if table.row_count:
        console.print(table)
    hidden = 0 if show_passed else sum(1 for c in receipt.checks if c.outcome is Outcome.PASS)
    if hidden:
        console.print(f"[green]{hidden} check result(s) passed[/] (shown with --all)")
    counts = ", ".join(f"{v} {k}" for k, v in receipt.summary.items() if v)
    style = "bold green" if receipt.passed else "bold red"
    console.print(
        f"[{style}]verdict: {receipt.verdict.upper()}[/]  worst action: "
        f"{receipt.worst_action.value}  ({counts})  "
        f"image: {markup(receipt.image_id or '?')}  stack: {markup(receipt.stack or '?')}  "
        f"{receipt.duration_s:.2f} s"
    )


def junit_xml(receipt: Receipt) -> str:
    return junit_document([junit_suite(receipt)])


def junit_document(suites: list[ET.Element]) -> str:
    """``<testsuites>`` around ``suites``, with the XML declaration. Every text and
    attribute passes ``imagectl.core.safetext.xml_text`` first: a host's message may hold
    escape sequences or C0 controls, which XML 1.0 cannot carry (an invalid report)."""
    root = ET.Element("testsuites")
    root.extend(suites)
    for node in root.iter():
        if node.text:
            node.text = xml_text(node.text)
        if node.tail:
            node.tail = xml_text(node.tail)
        for key, value in node.attrib.items():
            node.attrib[key] = xml_text(value)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def junit_suite(receipt: Receipt, name: str | None = None) -> ET.Element:
    """One receipt as a ``<testsuite>``: a test case per check result (per GPU, per XID
    code), failures and errors with the check's message, action and source."""
    checks = receipt.checks
    s = receipt.summary
    suite = ET.Element(
        "testsuite",
        name=name or f"imagectl.validate.{receipt.profile}",
        tests=str(len(checks)),
        failures=str(s.get("fail", 0)),
        errors=str(s.get("error", 0)),
        skipped=str(s.get("skip", 0)),
        time=f"{receipt.duration_s:.3f}",
        timestamp=receipt.started_at,
    )
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("image_id", receipt.image_id),
        ("stack", receipt.stack),
        ("stack_digest", receipt.stack_digest),
        ("validator_version", receipt.validator_version),
        ("verdict", receipt.verdict),
        ("worst_action", receipt.worst_action.value),
    ):
        ET.SubElement(props, "property", name=key, value=str(value))
    for c in checks:
        name = c.id if c.gpu is None else f"{c.id}[gpu{c.gpu}]"
        measured = c.measured
        if c.id.startswith("kernel.") and isinstance(measured, dict) and "code" in measured:
            name += f"[{measured['code']}]"  # one test case per XID/SXid code
        case = ET.SubElement(
            suite, "testcase", classname=c.id.split(".")[0], name=name, time=f"{c.duration_s:.4f}"
        )
        text = (
            f"measured={c.measured!r} expected={c.expected!r} "
            f"action={c.action.value} source={c.source}"
        )
        if c.outcome is Outcome.FAIL:
            ET.SubElement(case, "failure", message=c.message, type=c.action.value).text = text
        elif c.outcome is Outcome.ERROR:
            ET.SubElement(case, "error", message=c.message, type="error").text = text
        elif c.outcome is Outcome.SKIP:
            ET.SubElement(case, "skipped", message=c.message)
        elif c.outcome is Outcome.WARN:
            ET.SubElement(case, "system-out").text = f"WARN: {c.message} ({text})"
    return suite


def _key(c: CheckResult) -> tuple[str, int]:
    return c.id, -1 if c.gpu is None else c.gpu


def _changed(c: CheckResult) -> dict[str, object]:
    return {"outcome": c.outcome.value, "measured": c.measured, "action": c.action.value}


DIFF_HEADER = (
    "image_id",
    "stack",
    "stack_digest",
    "validator_version",
    "profile",
    "verdict",
    "worst_action",
)


def diff_receipts(a: Receipt, b: Receipt) -> dict[str, Any]:
    """What changed from receipt A to receipt B: header fields and per-check outcomes."""
    ha, hb = (
        a.model_dump(mode="json", include=set(DIFF_HEADER)),
        b.model_dump(mode="json", include=set(DIFF_HEADER)),
    )
    header = {k: {"a": ha[k], "b": hb[k]} for k in DIFF_HEADER if ha[k] != hb[k]}
    ca = {_key(c): c for c in a.checks}
    cb = {_key(c): c for c in b.checks}
    changed = []
    for key in sorted(set(ca) | set(cb)):
        x, y = ca.get(key), cb.get(key)
        if x is not None and y is not None and _changed(x) == _changed(y):
            continue
        changed.append(
            {
                "id": key[0],
                "gpu": None if key[1] < 0 else key[1],
                "a": None if x is None else _changed(x),
                "b": None if y is None else _changed(y),
            }
        )
    return {"header": header, "checks": changed}


def write_junit(receipt: Receipt, path: Path) -> None:
    """``--junit FILE``: the JUnit XML, whole or not at all."""
    atomic_write(path, junit_xml(receipt))
