"""``imagectl rollout --stack S``: advance, hold or roll back the stack's canary from the
fleet's health in Prometheus (``imagectl.rollout``).

Prometheus is named by ``IMAGECTL_PROMETHEUS_URL`` and its auth by
``IMAGECTL_PROMETHEUS_TOKEN`` or ``IMAGECTL_PROMETHEUS_USER`` / ``_PASSWORD`` (or the
URL's user information, or ``IMAGECTL_PROMETHEUS_SIGV4_REGION`` for a managed Prometheus;
headers such as ``X-Scope-OrgID`` by ``IMAGECTL_PROMETHEUS_HEADERS`` or ``_HEADERS_FILE``):
never by an option, so no secret is in argv.
``IMAGECTL_ROLLOUT_POLICY`` names a fleet's own policy file (``policy.yaml``'s schema).
``--deadline`` bounds the whole command. Exit codes: 0 advance (the candidate promoted to
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
from imagectl.core.safetext import cell, cells, one_line

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
        f"[{colour}]{result.decision}[/] ", cell(one_line(f"{result.candidate} ({result.stack} "
        f"on {result.cloud}), window {result.window_s} s, look {result.look}: {result.reason}")),
        sep="",
    )  # fmt: skip
    for d in result.shapes:
        c, b = d.canary, d.baseline
        table = Table(
            title=one_line(f"{d.shape}: {d.decision} (canary / predecessor)"),
            title_justify="left",
        )
        for col in ("", "canary", "predecessor"):
            table.add_column(col)
        rows = [
            ("launched", c.launched, b.launched),
            ("reporting", c.reporting, b.reporting),
            ("unknown", c.unknown, b.unknown),
            ("node-hours", f"{c.node_hours:g}", f"{b.node_hours:g}"),
            ("boot check failed", c.boot_check_failed, b.boot_check_failed),
            ("drain", c.drain, b.drain),
            *((f"incidents: {k}", c.events[k], b.events[k]) for k in c.events),
        ]
        for row in rows:
            table.add_row(*cells(*row))
        out.print(table)
        if d.comparisons:
            tests = Table(show_header=True)
            for col in ("comparison", "test", "statistic", "p", "threshold", "failed"):
                tests.add_column(col)
            for x in d.comparisons:
                stat = f"{'ratio' if x.kind == 'rate' else 'excess'} {x.effect:.3g}"
                p_value, threshold = f"{x.p_value:.3g}", f"{x.threshold:.3g}"
                failed = "yes" if x.failed else "no"
                tests.add_row(*cells(x.name, x.test, stat, p_value, threshold, failed))
            out.print(tests)
        for side, g in (("canary", c), ("predecessor", b)):
            for u in g.unknown_nodes:
                out.print(cell(one_line(f"  unknown {side} node {u['node']} ({u['status']}): "
                                        f"{u['why']}")))  # fmt: skip
    out.print(cell(one_line(f"applied: {result.applied}")))
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
    from imagectl.rollout.policy import policy_from_env
    from imagectl.rollout.prom import Prometheus
    from imagectl.rollout.run import rollout

    window_s = parse_window(window) if window is not None else None
    policy = policy_from_env()
    prometheus = Prometheus.from_env()
    resolved = load_stack_for(workspace(ctx), stack)
    chosen = choose_cloud(resolved.stack, cloud)
    provider = provider_for(resolved, chosen)
    catalog = open_catalog()
    try:
        out = console(stderr=as_json)
        result = rollout(
            catalog, provider, resolved, prometheus=prometheus, window_s=window_s,
            dry_run=dry_run, policy=policy, progress=lambda line: out.print(cell(line)),
        )  # fmt: skip
    finally:
        catalog.close()
    if as_json:
        emit_json(result.to_dict())
    else:
        render(console(), result)
    return int(result.exit_code)
