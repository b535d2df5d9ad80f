"""imagectl plan"""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    workspace,
)
from imagectl.paths import state_dir


@click.command("plan")
@stack_option("Only this stack.")
@cloud_option("Only this cloud.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the resolved variable files (default: <state dir>/plan).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context, stack: str | None, cloud: str | None, out: Path | None, as_json: bool
) -> None:
    """Print the build matrix and write the resolved Packer and Ansible variable files."""
    from imagectl.building.plan import build_plan, rows_as_dicts

    out_dir = out or state_dir() / "plan"
    rows = build_plan(workspace(ctx), stack, cloud, out_dir)
    if as_json:
        emit_json({"out_dir": str(out_dir), "matrix": rows_as_dicts(rows)})
        return
    from rich.table import Table

    table = Table(title="Build matrix")
    for col in ("stack", "digest", "cloud", "build at", "build on", "validate on", "replicate to"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.stack,
            r.digest,
            r.cloud,
            r.build_location,
            r.build_machine,
            ", ".join(r.validation_shapes),
            ", ".join(r.target_regions),
        )
    out_console = console()
    out_console.print(table)
    out_console.print(f"variable files written under {out_dir}", markup=False)
