"""``imagectl collectives``: this node's part of a collective run across nodes.

Run by ``imagectl validate-image --nodes N`` on every node of the run at once
(playbooks/fabric.yml); prints the node's result as JSON (``imagectl.validators.
collectives.node``). Exit 0 when every collective passed, 1 when one failed, 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.core.output import emit_json, json_flag
from imagectl.validators.commands.controller import hooks
from imagectl.validators.commands.options import (
    KeepsArgs,
    device_option,
    expect_option,
    hostfile_option,
    profile_option,
    rerun_under_toolkit,
    shape_option,
    toolkit_wheelhouse_option,
)


@click.command("collectives", cls=KeepsArgs)
@hostfile_option(
    "Hostfile: one host per line, the first is the rendezvous (validate --nodes's format).",
    required=True,
)
@click.option("--address", help="This node's address in the hostfile (default: the one it holds).")
@expect_option("the image's")
@shape_option()
@profile_option(
    "The size sweep and timeouts (validators/collectives/profiles.py).",
    default="quick",
    loaded_only=True,
)
@device_option()
@click.option(
    "--op",
    "ops",
    multiple=True,
    default=("all_reduce",),
    show_default=True,
    type=click.Choice(["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]),
)
@click.option(
    "--max-bytes",
    type=click.IntRange(1024, 1 << 40),
    help="Stop the size sweep here (a slow emulated network).",
)
@toolkit_wheelhouse_option(
    "The GPU toolkit's wheelhouse, installed for this run only (as validate's)."
)
@json_flag("Print JSON (what this command always prints: accepted like every command's).")
@click.pass_context
def command(
    ctx: click.Context,
    nodes: str,
    address: str | None,
    expect_file: Path | None,
    shape: str | None,
    profile: str,
    device: str,
    ops: tuple[str, ...],
    max_bytes: int | None,
    toolkit_wheelhouse: Path | None,
    as_json: bool,
) -> int:
    """Run this node's ranks of the collectives across the hostfile's nodes; print JSON."""
    if toolkit_wheelhouse is not None:
        return rerun_under_toolkit(ctx, toolkit_wheelhouse)
    from imagectl.validators.collectives.node import run_node
    from imagectl.validators.expectations import resolve_expectations
    from imagectl.validators.jsonfile import finish_stdin

    expect = resolve_expectations(
        images_dir=hooks(ctx).images_dir(ctx), expect_file=expect_file, shape=shape
    )
    finish_stdin("Send the expectations (--expect -) and nothing else")
    result = run_node(
        expect, nodes=nodes, address=address, profile=profile, device=device,
        ops=list(ops), max_bytes=max_bytes,
    )  # fmt: skip
    emit_json(result)
    checks = result["checks"]
    failed = not isinstance(checks, list) or any(
        isinstance(c, dict) and c.get("outcome") in ("fail", "error") for c in checks
    )
    return 1 if failed else 0
