"""``imagectl receipt show FILE`` and ``imagectl receipt diff A B``."""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.cli.common import console, emit_json, json_option


@click.group("receipt")
def command() -> None:
    """Show or compare validation receipts."""


@command.command("show")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--all", "show_all", is_flag=True, help="List passing checks too.")
@json_option
def show(file: Path, show_all: bool, as_json: bool) -> int:
    """Print a receipt (validated against its schema). Exit 1 if its verdict is fail."""
    from imagectl.validators.receipt import load_receipt
    from imagectl.validators.report import render_table

    receipt = load_receipt(file)
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
    else:
        render_table(receipt, console=console(), show_passed=show_all)
    return 0 if receipt.passed else 1


@command.command("diff")
@click.argument("a", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(dir_okay=False, path_type=Path))
@json_option
def diff(a: Path, b: Path, as_json: bool) -> int:
    """What changed from receipt A to receipt B. Exit 1 if anything changed."""
    from rich.table import Table

    from imagectl.core.safetext import cell, cells
    from imagectl.validators.receipt import load_receipt
    from imagectl.validators.report import diff_receipts

    d = diff_receipts(load_receipt(a), load_receipt(b))
    if as_json:
        emit_json(d)
    else:
        out = console()
        for k, v in d["header"].items():
            out.print(cell(f"{k}: {v['a']} -> {v['b']}"))
        table = Table(title=cell(f"{a} -> {b}"))
        for col in ("check", "gpu", "A", "B"):
            table.add_column(col)

        def shown(x: dict | None) -> str:
            if x is None:
                return "(absent)"
            act = "" if x["action"] == "NONE" else f" {x['action']}"
            return f"{x['outcome']}{act} {x['measured'] if x['measured'] is not None else ''}"

        for c in d["checks"]:
            table.add_row(
                *cells(c["id"], "" if c["gpu"] is None else c["gpu"], shown(c["a"]), shown(c["b"]))
            )
        out.print(table if d["checks"] else "no check changed")
    return 1 if d["header"] or d["checks"] else 0
