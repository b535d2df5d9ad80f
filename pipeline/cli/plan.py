"""imagectl plan"""

from __future__ import annotations

from pathlib import Path
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
from imagectl.paths import state_dir

if TYPE_CHECKING:
    from imagectl.building.plan import PlanRow


@click.command("plan")
@stack_option("Only this stack.")
@cloud_option("Only this cloud.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the resolved variable files (default: <state dir>/plan).",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Ask no cloud for the base image: a stack's pinned id only (the build resolves "
    "the others).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack: str | None,
    cloud: str | None,
    out: Path | None,
    offline: bool,
    as_json: bool,
) -> None:
    """Print the build matrix, with each base image resolved to its cloud id, and write the
    resolved Packer and Ansible variable files.

    Exit 2 when a cloud could not be asked for a base image (the other rows are shown)."""
    from imagectl.building.plan import build_plan, rows_as_dicts

    out_dir = out or state_dir() / "plan"
    rows = build_plan(workspace(ctx), stack, cloud, out_dir, offline=offline)
    unresolved = [r for r in rows if r.base_image is None and not offline]
    if as_json:
        emit_json({"out_dir": str(out_dir), "offline": offline, "matrix": rows_as_dicts(rows)})
        if unresolved:
            ctx.exit(2)
        return
    from rich.table import Table

    table = Table(title="Build matrix")
    columns = ("stack", "digest", "cloud", "base image", "build at", "build on", "validate on",
               "replicate to")  # fmt: skip
    for col in columns:
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.stack,
            r.digest,
            r.cloud,
            _base(r.base_image),
            r.build_location,
            r.build_machine,
            ", ".join(r.validation_shapes),
            ", ".join(r.target_regions),
        )
    out_console = console()
    out_console.print(table)
    out_console.print(f"variable files written under {out_dir}", markup=False)
    err = console(stderr=True)
    for (cloud_name, error), stacks in _by_cause(rows, offline).items():
        err.print(  # one paragraph per cloud and cause, not one per stack
            f"{cloud_name}: base image not resolved for {', '.join(stacks)}: {error}",
            markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip
    if unresolved:
        err.print(
            "To see the matrix from the pins alone, asking no cloud: `imagectl plan --offline`",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        ctx.exit(2)


def _by_cause(rows: list[PlanRow], offline: bool) -> dict[tuple[str, str], list[str]]:
    """(cloud, error) -> the stacks it left unresolved."""
    causes: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r.base_image_error and not offline:
            causes.setdefault((r.cloud, r.base_image_error), []).append(r.stack)
    return causes


def _base(doc: dict[str, object] | None) -> str:
    if not doc:
        return "unresolved"
    return f"{doc['id']} ({doc['source']})"
