"""``imagectl run``: the whole pipeline end to end on this machine, no cloud account.

    imagectl run --stack local [--regions N] [--inject-fault unheld-package|ssh-host-key]

Builds the Debian base image (debootstrap, cached), builds the candidate with Packer's
qemu builder and playbooks/site.yml, boots it in QEMU (KVM if it works, TCG otherwise),
validates it over SSH, records everything in the catalog and promotes it into the local
registry's regions, or blocks it. Exit codes: 0 promoted, 1 blocked or failed, 2 bad
input. Implementation: ``imagectl.orchestrate.run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from imagectl.cli.common import (
    accel_option,
    console,
    emit_json,
    inject_fault_option,
    json_option,
    stack_option,
    workspace,
)
from imagectl.core.numbers import Bounded

if TYPE_CHECKING:
    from rich.console import Console

    from imagectl.orchestrate.run import RunResult


@click.command("run")
@stack_option("Stack with a clouds.local.", default="local")
@click.option(
    "--regions",
    "regions",
    type=Bounded(1, 64, integer=True),
    default=None,
    help="Promote to the first N local regions.",
)
@inject_fault_option("Alter the candidate so that validation must block it (demonstration).")
@accel_option("QEMU accelerator; auto probes KVM and falls back to TCG.")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build the candidate even when one of identical inputs is cached.",
)
@click.option("--rebuild-base", is_flag=True, help="Rebuild the cached Debian base image.")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack: str,
    regions: int | None,
    inject_fault: str | None,
    accel: str,
    rebuild: bool,
    rebuild_base: bool,
    as_json: bool,
) -> int:
    """Run pins -> build -> boot -> validate -> decide -> promote on this machine."""
    from imagectl.embedded.progress import Progress
    from imagectl.orchestrate.run import RunOptions, run_local

    ws = workspace(ctx)
    out = console(stderr=as_json)
    progress = Progress(out)
    opts = RunOptions(
        stack=stack,
        regions=regions,
        inject_fault=inject_fault,
        accel=accel,
        rebuild=rebuild,
        rebuild_base=rebuild_base,
    )
    out.print(f"[bold]imagectl run[/] --stack {stack}: build -> boot -> validate -> promote")
    from imagectl.embedded.procs import Terminated

    try:
        result = run_local(ws, opts, progress)
    except Terminated as exc:
        out.print(f"[yellow]stopped by {exc}; every VM and helper process was stopped[/]")
        return 128 + exc.signum
    except KeyboardInterrupt:
        out.print("[yellow]interrupted; every VM and helper process was stopped[/]")
        return 130
    if as_json:
        emit_json({**result.to_dict(), "status": _status_data(stack)})
    else:
        _summary(out, result)
        _status_view(stack)
    return result.exit_code


def _summary(out: Console, result: RunResult) -> None:
    from rich.markup import escape
    from rich.table import Table

    from imagectl.embedded.progress import fmt_s

    table = Table(title="Local run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("image", result.image_id or "-")
    table.add_row("file", result.image_file or "-")
    build = result.build_id or "-"
    table.add_row("build", build + (" (reused candidate)" if result.candidate_reused else ""))
    if result.fault:
        table.add_row("injected fault", escape(f"{result.fault['name']}: {result.fault['detail']}"))
    verdict = result.verdict or "-"
    style = "green" if verdict == "pass" else "red"
    table.add_row("receipt", f"[{style}]{verdict}[/] (worst action {result.worst_action or '-'})")
    for check in result.failing_checks:
        # the host's words (its receipt): never markup
        table.add_row(
            "failing check", f"[red]{escape(check['name'])}[/]: {escape(check['message'])}"
        )
    table.add_row("receipt file", result.receipt or "-")
    reached = ", ".join(result.regions_reached) or "none"
    table.add_row("regions", f"{reached} (of {', '.join(result.regions)})")
    colour = {"promoted": "green", "blocked": "red"}.get(result.outcome, "yellow")
    decision = f"[{colour}]{result.outcome.upper()}[/]"
    if result.blocked_reason:
        decision += f": {escape(result.blocked_reason)}"
    table.add_row("decision", decision)
    if result.error:
        table.add_row("error", f"[red]{escape(result.error)}[/]")
    table.add_row("time", " · ".join(f"{k} {fmt_s(v)}" for k, v in result.timings.items()))
    out.print(table)


def _status_data(stack: str) -> Any:
    from imagectl.catalog.db import open_catalog
    from imagectl.clouds.local.spec import SPEC as LOCAL
    from imagectl.promotion.query import catalog_status

    return catalog_status(open_catalog(), stack=stack, cloud=LOCAL.name, events=8)


def _status_view(stack: str) -> None:
    from imagectl.cli.status import command as status
    from imagectl.clouds.local.spec import SPEC as LOCAL

    console().print(f"\n[bold]imagectl status[/] --stack {stack} --cloud {LOCAL.name}")
    status.main(args=["--stack", stack, "--cloud", LOCAL.name], standalone_mode=False)
