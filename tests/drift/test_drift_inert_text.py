"""A fleet host's receipt writes part of a drift finding (its file name, versions, the
detail): the issue body (``--format markdown``) and the terminal table show it inert.
Rendered through a CommonMark+table renderer, as GitHub would."""

from __future__ import annotations

import io

from markdown_it import MarkdownIt
from rich.console import Console

from imagectl.drift.findings import DriftReport, Finding
from imagectl.drift.report import render_markdown, render_table

HOSTILE = "x) | [link](https://evil.example) @acme/sec #1 <b>bold</b>\n# heading\x1b]52;c;QQ==\x07"


def _report() -> DriftReport:
    report = DriftReport(sources=("hosts",), as_of="2026-11-01")
    report.stack("h100-training", "images/stacks/h100-training.yaml").findings.append(
        Finding(
            source="hosts",
            stack="h100-training",
            kind="host-kernel-drift",
            subject=f"node-1 {HOSTILE}",
            current="6.8.0-1039-aws",
            available=HOSTILE,
            detail=f"[/] [link=https://evil.example]x[/link] {HOSTILE}",
        )
    )
    return report


def test_a_hosts_words_are_inert_in_the_issue_body() -> None:
    md = render_markdown(_report())
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<a " not in html and "<b>" not in html and "<h1>" not in html
    (row,) = [r for r in html.split("<tr>") if "host-kernel-drift" in r]
    assert row.count("<td>") == 7, row
    assert "\x1b" not in md and "\x07" not in md


def test_a_hosts_words_are_inert_in_the_terminal() -> None:
    out = io.StringIO()
    render_table(_report(), Console(file=out, width=400, force_terminal=True))
    text = out.getvalue()
    assert "[/]" in text and "[link=https://evil.example]" in text  # literal, not markup
    assert "\x1b]52" not in text and "\x07" not in text and "\x1b]8;" not in text  # no OSC
