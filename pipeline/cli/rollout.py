"""``imagectl rollout --stack S``: advance, hold or roll back the stack's canary from the
fleet's health in Prometheus (``imagectl.rollout``; issue 47).

Prometheus is named by ``IMAGECTL_PROMETHEUS_URL`` and its auth by
``IMAGECTL_PROMETHEUS_TOKEN`` or ``IMAGECTL_PROMETHEUS_USER`` / ``_PASSWORD``: never by
an option, so no secret is in argv. Exit codes: 0 advance (the candidate promoted to
latest), 1 roll back (canary pointer back, candidate blocked), 3 hold (too little data,
or Prometheus unavailable; nothing changed), 2 bad input.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    workspace,
)
from imagectl.core.errors import UserError
from imagectl.core.safetext import cell

if TYPE_CHECKING:
    from rich.console import Console

    from imagectl.rollout.run import RolloutResult

_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


MAX_WINDOW_S = 90 * 86400  # longer than any Prometheus keeps by default (15 d)


def parse_window(text: str) -> int:
    m = _DURATION.match(text.strip())
    seconds = int(m.group(1)[:12]) * _UNIT[m.group(2)] if m else 0
    if not m or not 0 < seconds <= MAX_WINDOW_S:
        raise UserError(
            f"--window {text[:40]!r} is not a duration from 1 s to 90 d",
            hint="Pass seconds, or a number with s, m, h or d: 600, 30m, 6h, 1d",
        )
    return seconds


def render(out: Console, result: RolloutResult) -> None:
    from rich.table import Table

    colour = {"advance": "green", "hold": "yellow", "rollback": "red"}[result.decision]
    out.print(
        f"[{colour}]{result.decision}[/] ", cell(f"{result.candidate} ({result.stack} on "
        f"{result.cloud}), window {result.window_s} s: {result.reason}"), sep="",
    )  # fmt: skip
    if result.shapes:
        table = Table(title="per shape: canary vs predecessor", title_justify="left")
        for col in ("shape", "decision", "nodes", "node-hours", "boot failed", "drain", "events"):
            table.add_column(col)
        for d in result.shapes:
            c, b = d.canary, d.baseline
            events = ", ".join(f"{k} {c.events[k]}/{b.events[k]}" for k in c.events)
            table.add_row(
                cell(d.shape), d.decision, f"{c.nodes}/{b.nodes}",
                f"{c.node_hours:g}/{b.node_hours:g}",
                f"{c.boot_check_failed}/{b.boot_check_failed}",
                f"{c.drain}/{b.drain}", events,
            )  # fmt: skip
        out.print(table)
    out.print(cell(f"applied: {result.applied}"))
    if result.decision_id is not None:
        out.print(f"recorded as rollout decision {result.decision_id} (imagectl status shows it)")


@click.command("rollout")
@stack_option("The stack whose canary to decide on.", required=True)
@cloud_option("Cloud (default: the stack's only cloud).")
@click.option(
    "--window",
    default=None,
    help="How far back to read the fleet's series: seconds or 30m, 6h, 1d (default: "
    "policy.yaml's window_s, 6h).",
)
@click.option("--dry-run", is_flag=True, help="Decide and print; record and change nothing.")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack: str,
    cloud: str | None,
    window: str | None,
    dry_run: bool,
    as_json: bool,
) -> int:
    """Advance, hold or roll back the stack's canary from its fleet's health."""
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion.context import choose_cloud, load_stack_for, provider_for
    from imagectl.rollout.prom import Prometheus
    from imagectl.rollout.run import rollout

    window_s = parse_window(window) if window is not None else None
    prometheus = Prometheus.from_env()
    resolved = load_stack_for(workspace(ctx), stack)
    chosen = choose_cloud(resolved.stack, cloud)
    provider = provider_for(resolved, chosen)
    catalog = open_catalog()
    try:
        out = console(stderr=as_json)
        result = rollout(
            catalog, provider, resolved, prometheus=prometheus, window_s=window_s,
            dry_run=dry_run, progress=lambda line: out.print(cell(line)),
        )  # fmt: skip
    finally:
        catalog.close()
    if as_json:
        emit_json(result.to_dict())
    else:
        render(console(), result)
    return int(result.exit_code)
