"""``imagectl collectives``: this node's part of a collective run across nodes.

Run by ``imagectl validate-image --nodes N`` on every node of the run at once
(playbooks/fabric.yml); prints the node's result as JSON (``imagectl.validators.
collectives.node``). Exit 0 when every collective passed, 1 when one failed, 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.core.errors import UserError
from imagectl.core.output import emit_json
from imagectl.validators.commands.controller import complete, hooks
from imagectl.validators.commands.validate import TOOLKIT_OPTION, _KeepsArgs, _without_toolkit


@click.command("collectives", cls=_KeepsArgs)
@click.option(
    "--nodes",
    required=True,
    type=click.Path(dir_okay=False),
    help="Hostfile: one host per line, the first is the rendezvous (validate --nodes's format).",
)
@click.option("--address", help="This node's address in the hostfile (default: the one it holds).")
@click.option(
    "--expect",
    "expect_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Expectations from a JSON file, - for standard input (default: the image's).",
)
@click.option(
    "--shape",
    shell_complete=complete("shape"),
    help="The machine shape (images/catalog/shapes.yaml).",
)
@click.option(
    "--profile",
    type=click.Choice(["quick", "full", "burn"]),
    default="quick",
    show_default=True,
    help="The size sweep and timeouts (validators/collectives/profiles.py).",
)
@click.option(
    "--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True
)
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
    type=click.IntRange(min=1024),
    help="Stop the size sweep here (a slow emulated network).",
)
@click.option(
    TOOLKIT_OPTION,
    "toolkit_wheelhouse",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The GPU toolkit's wheelhouse, installed for this run only (as validate's).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (what this command always prints: accepted like every command's).",
)
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
        from imagectl.validators.toolkit_venv import run_with_toolkit

        root = (ctx.find_root().obj or {}).get("root")
        again = _without_toolkit(ctx.meta["imagectl.validate.args"])
        return run_with_toolkit(
            toolkit_wheelhouse, [*(["--root", root] if root else []), "collectives", *again]
        )
    from imagectl.validators.collectives.node import run_node
    from imagectl.validators.expectations import resolve_expectations
    from imagectl.validators.jsonfile import finish_stdin

    if not Path(nodes).is_file():
        raise UserError(f"cannot read the --nodes hostfile {nodes}: no such file")
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
