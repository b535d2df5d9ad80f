"""``imagectl validate``: judge this host (or a snapshot of one) and write a receipt."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from imagectl.core.commandtext import command_line, say
from imagectl.core.errors import UserError
from imagectl.core.numbers import Bounded
from imagectl.core.output import console, crash_traces, json_option, show
from imagectl.validators.commands.controller import complete, hooks
from imagectl.validators.commands.options import (
    FILE,
    FILE_OR_STDIN,
    LOADED_PROFILES,
    TOOLKIT_OPTION,
    KeepsArgs,
    device_option,
    expect_option,
    history_option,
    hostfile_option,
    hygiene_root_option,
    image_id_option,
    junit_option,
    output_option,
    profile_option,
    rerun_under_toolkit,
    sandbox_option,
    shape_option,
    toolkit_wheelhouse_option,
)

if TYPE_CHECKING:  # pydantic loads when the command runs, not for --help
    from imagectl.validators.receipt import Receipt


@click.command("validate", cls=KeepsArgs)
@profile_option(
    "boot: no stress, <= 30 s; quick: + CUDA/collective smoke; "
    "full: sustained load; burn: long stress (opt-in).",
    default="boot",
)
@click.option(
    "--stack",
    "stack",
    shell_complete=complete("stack"),
    help="Expectations from this stack's pins (images/stacks/).",
)
@expect_option("/etc/imagectl/expect.json if present")
@shape_option()
@click.option(
    "--gpu",
    shell_complete=complete("gpu"),
    help="A host with no catalog shape: its GPU model (a SKU of images/compat/gpus.yaml, "
    "e.g. H200-SXM-141GB); with --gpu-count.",
)
@click.option("--gpu-count", type=click.IntRange(1, 64), help="How many GPUs the --gpu host has.")
@click.option(
    "--replay",
    "replay",
    type=FILE_OR_STDIN,
    help="Run the checks against a snapshot instead of this host; - for standard input "
    "(with --expect - too, standard input holds the snapshot, then the expectations).",
)
@click.option(
    "--kernel-log",
    "kernel_log",
    type=FILE,
    help="Read the kernel log from a file instead of journalctl -k -b / dmesg.",
)
@history_option(
    "Folder of previous boots' receipts: an XID the previous boot also had on the same "
    "GPU escalates where NVIDIA's Xid Catalog says so."
)
@image_id_option("The image being validated (default: manifest or cloud metadata).")
@hygiene_root_option("File tree judged by the image-hygiene checks.")
@click.option(
    "--hygiene/--no-hygiene",
    default=True,
    show_default=True,
    help="Run the image-hygiene checks (off for fleet boot checks).",
)
@device_option("Device for the part-2 smoke tests.")
@hostfile_option("Hostfile for multi-node collectives.")
@click.option("--baseline", type=FILE, help="Receipt to compare measured performance against.")
@click.option(
    "--max-regression-pct",
    type=Bounded(0, 100, unit="percent"),
    default=5.0,
    show_default=True,
    help="Largest accepted drop against --baseline.",
)
@sandbox_option(
    "A try-it run: with --replay, mark the receipt as a sandbox replay, which the "
    "promotion gate accepts (and records) instead of refusing it."
)
@toolkit_wheelhouse_option(
    "A wheelhouse of the GPU toolkit (imagectl validate-image ships the stack's): "
    "installed offline with --require-hashes into a venv beside it, the run done under that "
    "venv's interpreter, the venv removed afterwards."
)
@click.option(
    "--toolkit",
    "toolkit",
    type=click.Choice(["pinned", "host"]),
    default="pinned",
    show_default=True,
    help="host: run the GPU work on the torch this host already has (a host you already run); "
    "its version and CUDA build go in the receipt, and the image gate refuses such a receipt "
    "where the stack pins another toolkit. pinned: the stack's toolkit is required.",
)
@json_option
@click.option("--all", "show_all", is_flag=True, help="List passing checks in the table too.")
@junit_option("Write JUnit XML.")
@click.option(
    "--prometheus",
    type=FILE,
    help="Write the result as Prometheus text-format metrics here, atomically (the node "
    "exporter's textfile collector: /var/lib/node_exporter/textfile_collector/imagectl.prom).",
)
@output_option("Write the receipt (JSON) here.")
@click.pass_context
def command(
    ctx: click.Context,
    profile: str,
    stack: str | None,
    expect_file: Path | None,
    shape: str | None,
    gpu: str | None,
    gpu_count: int | None,
    replay: Path | None,
    kernel_log: Path | None,
    history_dir: Path | None,
    image_id: str | None,
    hygiene_root: str,
    hygiene: bool,
    device: str,
    nodes: str | None,
    baseline: Path | None,
    max_regression_pct: float,
    sandbox: bool,
    toolkit_wheelhouse: Path | None,
    toolkit: str,
    as_json: bool,
    show_all: bool,
    junit: Path | None,
    prometheus: Path | None,
    output: Path | None,
) -> int:
    """Validate this GPU host: hardware health, kernel-log XIDs, software conformance.

    Exit 0 when every check passes, 1 when one fails, 2 on bad input.
    """
    crash_traces()
    if toolkit_wheelhouse is not None and toolkit == "host":
        raise UserError(
            f"{TOOLKIT_OPTION} installs the stack's toolkit; --toolkit host uses the host's own",
            hint="Pass one of them",
        )
    if toolkit_wheelhouse is not None:
        return rerun_under_toolkit(ctx, toolkit_wheelhouse)
    from imagectl.validators.expectations import require_expectations, resolve_expectations
    from imagectl.validators.jsonfile import STDIN, finish_stdin
    from imagectl.validators.receipt import load_receipt, write_receipt
    from imagectl.validators.report import write_junit
    from imagectl.validators.session import Options, validate
    from imagectl.validators.snapshot import load_snapshot

    if kernel_log is not None and not kernel_log.is_file():
        raise UserError(f"cannot read the kernel log {kernel_log}: no such file")
    if history_dir is not None and not history_dir.is_dir():
        raise UserError(
            f"--history {history_dir} is not a folder: pass the folder of previous boots' "
            "receipts (the boot unit keeps them in /var/lib/imagectl/boots)"
        )
    if (gpu is None) != (gpu_count is None):
        raise UserError(
            "--gpu and --gpu-count go together: the GPU model and how many the host has",
            hint="Pass both, e.g. --gpu H200-SXM-141GB --gpu-count 8",
        )
    if gpu is not None and (shape or stack or expect_file):
        raise UserError(
            "--gpu describes a host with no catalog shape; --shape, --stack and --expect "
            "describe it already",
            hint="Pass --gpu/--gpu-count or those, not both",
        )
    _refuse_dropped(ctx, replay=replay is not None)
    snapshot = load_snapshot(replay) if replay is not None else None
    if stack and expect_file:
        raise UserError("--stack and --expect are exclusive", hint="Pass one of them")
    controller = hooks(ctx)
    if stack:
        if controller.stack_expectations is None:
            raise UserError(
                f"--stack {stack} needs the controller, which reads stack files; this "
                "validator runs alone",
                hint="Pass the expectations with --expect FILE (an image built by imagectl "
                "holds its own in /etc/imagectl/expect.json, read by default)",
            )
        expect = controller.stack_expectations(controller.images_dir(ctx), stack, shape)
    else:
        expect = resolve_expectations(
            images_dir=controller.images_dir(ctx),
            expect_file=expect_file,
            shape=shape,
            replay=snapshot,
            gpu=(gpu, gpu_count) if gpu is not None and gpu_count is not None else None,
        )
    require_expectations(expect, snapshot)
    finish_stdin("Send the snapshot (--replay -), then the expectations (--expect -), nothing else")
    if sandbox and snapshot is None:
        raise UserError(
            "--sandbox marks a replayed snapshot as a try-it receipt; it needs --replay",
            hint="Drop --sandbox on a live host: a live receipt needs no switch",
        )
    opts = Options(
        profile=profile,
        expect=expect,
        snapshot=snapshot,
        snapshot_path=(STDIN if str(replay) == "-" else str(replay)) if replay else None,
        kernel_log_file=kernel_log,
        history_dir=history_dir,
        hygiene=hygiene,
        hygiene_root=hygiene_root,
        image_id=image_id,
        device=device,
        nodes=nodes,
        baseline=load_receipt(baseline) if baseline is not None else None,
        max_regression_pct=max_regression_pct,
        sandbox=sandbox,
        toolkit=toolkit,
    )
    receipt = validate(opts)
    if output is not None:
        write_receipt(receipt, output)
    if junit is not None:
        write_junit(receipt, junit)
    if prometheus is not None:
        from imagectl.validators.prometheus import write_prometheus

        write_prometheus(receipt, prometheus)
    show(as_json, receipt.model_dump(mode="json"), lambda: _view(receipt, show_all, output))
    return 0 if receipt.verdict == "pass" else 1


def _view(receipt: Receipt, show_all: bool, output: Path | None) -> None:
    from imagectl.validators.report import render_table

    render_table(receipt, console=console(), show_passed=show_all)
    for named in commands_named(receipt, show_all):  # a table cell breaks them: whole here
        command_line(console(), "to run:", named)
    if output is not None:
        console().print(f"receipt: {output}")


def _given(ctx: click.Context, name: str) -> bool:
    """``name`` was given (command line or environment), not left at its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def _refuse_dropped(ctx: click.Context, *, replay: bool) -> None:
    """An option that cannot act on this run is refused (exit 2 naming what it conflicts
    with), never dropped: the run would be judged as if it had not been given."""
    p = ctx.params
    loaded = p["profile"] in LOADED_PROFILES
    conflicts = [
        (
            p["nodes"] is not None and replay,
            "--nodes runs collectives across hosts; --replay judges a snapshot, which runs none",
            "Drop --nodes, or validate the hosts live",
        ),
        (
            p["nodes"] is not None and not loaded,
            f"--nodes runs collectives, which --profile {p['profile']} does not run",
            "Pass --profile quick (or full, burn), or drop --nodes",
        ),
        (
            p["device"] != "auto" and not loaded,
            f"--device {p['device']} picks the device of the GPU work, which --profile "
            f"{p['profile']} does not run",
            "Pass --profile quick (or full, burn), or drop --device",
        ),
        (
            p["toolkit"] == "host" and not loaded,
            f"--toolkit host names the toolkit of the GPU work, which --profile {p['profile']} "
            "does not run",
            "Pass --profile quick (or full, burn), or drop --toolkit",
        ),
        (
            _given(ctx, "max_regression_pct") and p["baseline"] is None,
            "--max-regression-pct is the largest drop accepted against --baseline, and no "
            "--baseline was given",
            "Pass --baseline RECEIPT, or drop --max-regression-pct",
        ),
        (
            p["show_all"] and p["as_json"],
            "--all lists the passing checks in the table; --json prints no table (its "
            "checks list has every check)",
            "Drop --all",
        ),
    ]
    for conflict, message, hint in conflicts:
        if conflict:
            raise UserError(message, hint=hint)
    unread = None
    if _given(ctx, "hygiene_root") and p["hygiene_root"] != "/":
        if not p["hygiene"]:
            unread = "--no-hygiene runs none of the image-hygiene checks"
        elif replay:
            unread = (
                "on a replay the hygiene checks judge the tree the snapshot recorded "
                "(capture another with `imagectl snapshot -o FILE --hygiene-root DIR`)"
            )
    if unread:  # the deploy playbook passes it on every run, a replay's too: said, not refused
        say(console(stderr=True), f"note: --hygiene-root {p['hygiene_root']} is not read: {unread}")


def commands_named(receipt: Receipt, show_all: bool) -> list[str]:
    """The commands the shown checks' messages name (in backticks), each once, in order."""
    found: list[str] = []
    for c in receipt.checks:
        if show_all or c.outcome.value != "pass":
            for named in re.findall(r"`(imagectl [^`]+)`", c.message or ""):
                if named not in found:
                    found.append(named)
    return found
