"""Human and CI views of a receipt: a rich table, JUnit XML, and a diff of two receipts."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rich.table import Table

from imagectl.fsutil import atomic_write

_STYLE = {
    "pass": "green",
    "fail": "bold red",
    "error": "bold magenta",
    "warn": "yellow",
    "skip": "dim",
}


def _fmt(value: Any) -> str:
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


def _grouped(
    checks: list[dict[str, Any]], show_passed: bool
) -> list[tuple[dict[str, Any], str, float]]:
    """Rows with the same check, outcome, measurement and message on several GPUs -> one row."""
    rows: list[tuple[dict[str, Any], list[int], float]] = []
    for c in checks:
        if not show_passed and c["outcome"] == "pass":
            continue
        key = (c["id"], c["outcome"], c["action"], repr(c.get("measured")), c.get("message"))
        last = rows[-1] if rows else None
        if (
            last is not None
            and c.get("gpu") is not None
            and last[1]
            and (
                last[0]["id"],
                last[0]["outcome"],
                last[0]["action"],
                repr(last[0].get("measured")),
                last[0].get("message"),
            )
            == key
        ):
            last[1].append(int(c["gpu"]))
            rows[-1] = (last[0], last[1], last[2] + c["duration_s"])
            continue
        rows.append((c, [] if c.get("gpu") is None else [int(c["gpu"])], c["duration_s"]))
    return [(c, _gpu_list(g), t) for c, g, t in rows]


def _gpu_list(gpus: list[int]) -> str:
    if not gpus:
        return ""
    if len(gpus) > 2 and gpus == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(map(str, gpus))


def render_table(receipt: dict[str, Any], *, console: Any, show_passed: bool = True) -> None:
    table = Table(title=f"imagectl validate --profile {receipt['profile']}", show_lines=False)
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
    for c, gpus, total_s in _grouped(receipt["checks"], show_passed):
        unit = f" {c['unit']}" if c.get("unit") and c.get("measured") is not None else ""
        cells = {
            "check": c["id"],
            "gpu": gpus,
            "outcome": f"[{_STYLE.get(c['outcome'], '')}]{c['outcome']}[/]",
            "measured": _fmt(c.get("measured")) + unit,
            "expected": _fmt(c.get("expected")),
            "action": "" if c["action"] == "NONE" else c["action"],
            "time": f"{total_s * 1000:.0f} ms",
            "message": c.get("message", ""),
        }
        table.add_row(*(cells[col] for col in cols))
    if table.row_count:
        console.print(table)
    hidden = sum(1 for c in receipt["checks"] if c["outcome"] == "pass") if not show_passed else 0
    if hidden:
        console.print(f"[green]{hidden} check result(s) passed[/] (shown with --all)")
    s = receipt["summary"]
    style = "bold green" if receipt["verdict"] == "pass" else "bold red"
    console.print(
        f"[{style}]verdict: {receipt['verdict'].upper()}[/]  worst action: "
        f"{receipt['worst_action']}  ({', '.join(f'{v} {k}' for k, v in s.items() if v)})  "
        f"image: {receipt.get('image_id') or '?'}  stack: {receipt.get('stack') or '?'}  "
        f"{receipt['duration_s']:.2f} s"
    )


def junit_xml(receipt: dict[str, Any]) -> str:
    checks = receipt["checks"]
    s = receipt["summary"]
    suite = ET.Element(
        "testsuite",
        name=f"imagectl.validate.{receipt['profile']}",
        tests=str(len(checks)),
        failures=str(s.get("fail", 0)),
        errors=str(s.get("error", 0)),
        skipped=str(s.get("skip", 0)),
        time=f"{receipt['duration_s']:.3f}",
        timestamp=receipt["started_at"],
    )
    props = ET.SubElement(suite, "properties")
    for key in (
        "image_id",
        "stack",
        "stack_digest",
        "validator_version",
        "verdict",
        "worst_action",
    ):
        ET.SubElement(props, "property", name=key, value=str(receipt.get(key)))
    for c in checks:
        name = c["id"] if c.get("gpu") is None else f"{c['id']}[gpu{c['gpu']}]"
        measured = c.get("measured")
        if c["id"].startswith("kernel.") and isinstance(measured, dict) and "code" in measured:
            name += f"[{measured['code']}]"  # one test case per XID/SXid code
        case = ET.SubElement(
            suite,
            "testcase",
            classname=c["id"].split(".")[0],
            name=name,
            time=f"{c['duration_s']:.4f}",
        )
        text = (
            f"measured={c.get('measured')!r} expected={c.get('expected')!r} "
            f"action={c['action']} source={c.get('source')}"
        )
        if c["outcome"] == "fail":
            ET.SubElement(
                case, "failure", message=c.get("message", ""), type=c["action"]
            ).text = text
        elif c["outcome"] == "error":
            ET.SubElement(case, "error", message=c.get("message", ""), type="error").text = text
        elif c["outcome"] == "skip":
            ET.SubElement(case, "skipped", message=c.get("message", ""))
        elif c["outcome"] == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {c.get('message', '')} ({text})"
    suites = ET.Element("testsuites")
    suites.append(suite)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def _key(c: dict[str, Any]) -> tuple[str, int]:
    return c["id"], -1 if c.get("gpu") is None else int(c["gpu"])


def diff_receipts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """What changed from receipt A to receipt B: header fields and per-check outcomes."""
    header = {
        k: {"a": a.get(k), "b": b.get(k)}
        for k in (
            "image_id",
            "stack",
            "stack_digest",
            "validator_version",
            "profile",
            "verdict",
            "worst_action",
        )
        if a.get(k) != b.get(k)
    }
    ca = {_key(c): c for c in a["checks"]}
    cb = {_key(c): c for c in b["checks"]}
    changed = []
    for key in sorted(set(ca) | set(cb)):
        x, y = ca.get(key), cb.get(key)
        if (
            x
            and y
            and (x["outcome"], x.get("measured"), x["action"])
            == (y["outcome"], y.get("measured"), y["action"])
        ):
            continue
        changed.append(
            {
                "id": key[0],
                "gpu": None if key[1] < 0 else key[1],
                "a": None
                if x is None
                else {k: x.get(k) for k in ("outcome", "measured", "action")},
                "b": None
                if y is None
                else {k: y.get(k) for k in ("outcome", "measured", "action")},
            }
        )
    return {"header": header, "checks": changed}


def write_junit(receipt: dict[str, Any], path: Path) -> None:
    """``--junit FILE``: the JUnit XML, whole or not at all."""
    atomic_write(path, junit_xml(receipt))
