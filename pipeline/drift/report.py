"""Render a ``DriftReport``: a rich table, JSON, or Markdown for a GitHub issue body.

The Markdown starts with a hidden marker per stack (``<!-- imagectl-drift:stack=S -->``)
that ``.github/workflows/drift.yml`` uses to find the stack's open issue.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.table import Table

from imagectl.core.safetext import cells, markup, md_cell
from imagectl.drift.findings import DriftReport, StackDrift
from imagectl.headline import could_not_run

if TYPE_CHECKING:
    from rich.console import Console

MARKER = "<!-- imagectl-drift:stack={stack} -->"
COLUMNS = ("source", "kind", "subject", "where", "current", "available", "detail")


def _where(f: Any) -> str:
    return "/".join(p for p in (f.cloud, f.region) if p) or "-"


def render_json(report: DriftReport) -> str:
    return json.dumps(report.as_dict(), indent=2, default=str) + "\n"


def render_table(report: DriftReport, console: Console) -> None:
    if report.headline:  # first, before any stack's "no drift"
        console.print(f"[red]{markup(report.headline)}[/]", highlight=False, soft_wrap=True)
    for s in report.stacks:
        if s.drifted:
            status = "[red]drift[/]"
        elif s.errors:
            status = "[yellow]no drift found by the checks that ran[/]"
        else:
            status = "[green]no drift[/]"
        table = Table(title=f"{markup(s.stack)}: {status}", title_justify="left")
        for col in COLUMNS:
            table.add_column(col, overflow="fold")
        for f in s.findings:
            style = {"drift": "", "warning": "yellow", "info": "dim"}.get(f.severity, "")
            table.add_row(  # a fleet host's receipt or an upstream index wrote some of it
                *cells(
                    f.source,
                    f.kind,
                    f.subject,
                    _where(f),
                    f.current or "-",
                    f.available or "-",
                    f.detail,
                ),
                style=style,
            )
        console.print(table)
        for e in s.errors:
            where = f" ({e.cloud})" if e.cloud else ""
            console.print(
                f"  [red]could not check[/] {markup(e.source)}{markup(where)}: "
                f"{markup(e.kind)}: {markup(e.message)}",
                highlight=False,
                soft_wrap=True,
            )
        for p in s.proposals:
            state = (
                "[red]blocked by " + ", ".join(p.blocked_by) + "[/]"
                if p.blocked_by
                else ("[green]written[/]" if s.written else "proposed")
            )
            console.print(
                f"  {markup(p.dotted)}: {markup(p.current)} -> {markup(p.proposed)} ({state})",
                highlight=False,
            )
    n = sum(1 for s in report.stacks if s.drifted)
    failed = len(report.not_run)  # (stack, source) checks, as the first line counts them
    console.print(
        f"{len(report.stacks)} stacks checked ({', '.join(report.sources)}), {n} with drift"
        + (f"; incomplete: {failed} check(s) could not run" if failed else ""),
        highlight=False,
    )


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def render_stack_markdown(s: StackDrift, report: DriftReport) -> str:
    lines = [MARKER.format(stack=s.stack), f"## Drift: `{s.stack}`", ""]
    failed = sorted({e.source for e in s.errors})
    if failed:  # first: an issue body must not read as an all-clear
        lines += [f"**{could_not_run(len(report.sources), failed)}.**", ""]
    lines.append(
        f"Checked {', '.join(report.sources)} as of {report.as_of}; stack file `{s.path}`."
    )
    lines.append("")
    if s.errors:
        lines += ["### Could not check", ""]
        for e in s.errors:
            where = f" ({e.cloud})" if e.cloud else ""
            lines.append(f"- `{e.source}`{where}, {e.kind}: {md_cell(e.message)}")
        lines += ["", "The results below are what the other checks found.", ""]
    if not s.findings:
        lines += [
            "No drift found." if not s.errors else "Nothing found by the checks that ran.",
            "",
        ]
    else:
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "---|" * len(COLUMNS))
        for f in s.findings:
            row = (  # what a host or an index wrote: inert code spans (imagectl.core.safetext)
                _cell(f.source),
                f"`{f.kind}`",
                *(md_cell(c or "-") for c in (f.subject, _where(f), f.current, f.available)),
                md_cell(f.detail + ("" if f.severity == "drift" else f" ({f.severity})")),
            )
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if s.proposals:
        lines += ["### Proposed pins", ""]
        for p in s.proposals:
            if p.blocked_by:
                verdict = f"not written: breaks {', '.join(p.blocked_by)}"
            else:
                verdict = "passes the compatibility rules"
            lines.append(
                f"- `{p.dotted}`: {md_cell(p.current)} -> {md_cell(p.proposed)} "
                f"({p.reason}; {verdict})"
            )
        lines += [
            "",
            f"Apply with `imagectl drift --stack {s.stack} --upstream --write` "
            "and open a pull request with the result.",
            "",
        ]
    return "\n".join(lines)


def render_markdown(report: DriftReport) -> str:
    return "\n".join(render_stack_markdown(s, report) for s in report.stacks)
