"""``imagectl build --stack S --cloud C [--dry-run]``: build one candidate image with Packer.

Parses the options and calls the build stage (``imagectl.building``): it resolves the
stack, writes ``<stack>.<cloud>.pkrvars.json`` and ``<stack>.<cloud>.ansible.json`` into
the build folder (``--var-dir`` or ``<state dir>/builds/<build id>``) and runs ``packer
build`` through imagectl's wrapper. This module prints the progress and, at the end, the
artifacts from Packer's manifest; ``--dry-run`` prints the exact command and variables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from imagectl.cli.common import (
    accel_option,
    cloud_option,
    console,
    emit_json,
    inject_fault_option,
    json_option,
    stack_option,
    workspace,
)
from imagectl.core.numbers import Bounded
from imagectl.packer.machine_readable import PackerEvent
from imagectl.paths import Workspace

if TYPE_CHECKING:
    from imagectl.building.stage import BuildRequest


@click.command("build")
@stack_option("Stack name (images/stacks/<name>.yaml).", dest="stack_name", required=True)
@cloud_option("Which template set.", required=True)
@click.option("--dry-run", "dry", is_flag=True, help="Print the packer command and variables only.")
@click.option(
    "--var-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the var files, logs and manifest (default: a new build folder).",
)
@click.option("--build-id", help="Use this build id instead of a new one.")
@click.option(
    "--timeout",
    "timeout_min",
    type=Bounded(1, 7 * 24 * 60, unit="minutes"),
    default=240,
    show_default=True,
    help="Minutes before the build is cancelled (Packer cleans up).",
)
@click.option(
    "--var",
    "overrides",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override one Packer variable (e.g. aws_endpoint_ec2=http://...); repeatable.",
)
@click.option(
    "--skip-provisioning",
    is_flag=True,
    help="No communicator and no Ansible (only for emulated clouds such as moto). The SBOM "
    "is then a stand-in made from the stack's pins, and says so.",
)
@click.option(
    "--reuse",
    is_flag=True,
    help="Local cloud: import the kept candidate of identical inputs instead of building.",
)
@inject_fault_option("Local cloud: register a copy altered so that validation must block it.")
@accel_option("Local cloud: QEMU accelerator (auto probes KVM, falls back to TCG).")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack_name: str,
    cloud: str,
    dry: bool,
    var_dir: Path | None,
    build_id: str | None,
    timeout_min: float,
    overrides: tuple[str, ...],
    skip_provisioning: bool,
    reuse: bool,
    inject_fault: str | None,
    accel: str,
    as_json: bool,
) -> None:
    """Build a candidate image of STACK for CLOUD with Packer."""
    # The stage records into the catalog (SQLAlchemy): loaded here so `--help` stays light.
    from imagectl.building.stage import BuildRequest, build_image, parse_overrides
    from imagectl.clouds.registry import cloud_spec

    request = BuildRequest(
        stack=stack_name,
        spec=cloud_spec(cloud),
        var_dir=var_dir,
        build_id=build_id,
        overrides=parse_overrides(overrides),
        skip_provisioning=skip_provisioning,
        timeout_s=timeout_min * 60,
        reuse=reuse,
        inject_fault=inject_fault,
        accel=accel,
    )
    if dry:
        _show_dry_run(workspace(ctx), request, as_json)
        return
    if request.spec.remote:  # the cheap part of `imagectl doctor`, before Packer starts
        from imagectl.clouds.account import real_cloud
        from imagectl.doctor.offline import preflight
        from imagectl.stacks import load_resolved

        ws = workspace(ctx)
        preflight(load_resolved(ws.images, stack_name)[1], ws.compat_dir, cloud,
                  real=real_cloud(cloud))  # fmt: skip
    out = console(stderr=True)

    def progress(event: PackerEvent) -> None:
        if event.type == "ui" and event.ui_level in ("say", "message", "error"):
            style = "red" if event.is_error else None
            for line in event.text.splitlines() or [""]:
                out.print(line, style=style, markup=False)

    from imagectl.embedded.progress import Progress

    outcome = build_image(workspace(ctx), request, on_event=progress, progress=Progress(out))
    if as_json:
        emit_json(outcome.to_dict())
        return
    con = console()
    reused = " (reused: a candidate of identical inputs)" if outcome.reused else ""
    con.print(f"build {outcome.build_id}: {len(outcome.artifacts)} artifact(s){reused}")
    for a, image in zip(outcome.artifacts, outcome.images, strict=True):
        con.print(f"  {a.cloud} {a.location} {a.id} ({image.state})", markup=False)
    if outcome.fault:
        con.print(
            f"  injected fault: {outcome.fault['name']}: {outcome.fault['detail']}", markup=False
        )
    if outcome.manifest_file:
        con.print(f"  manifest: {outcome.manifest_file}", markup=False)
    if outcome.sbom:
        stand_in = " (a stand-in from the stack's pins: nothing was provisioned)"
        con.print(
            f"  sbom: {outcome.sbom}{stand_in if request.skip_provisioning else ''}", markup=False
        )


def _show_dry_run(ws: Workspace, request: BuildRequest, as_json: bool) -> None:
    from imagectl.building.stage import dry_run

    shown = dry_run(ws, request)
    plan = shown.plan
    if as_json:
        emit_json(
            {
                "build_id": plan.build_id,
                "command": plan.command,
                "env": plan.env,
                "var_file": str(plan.var_file),
                "ansible_vars_file": str(plan.ansible_vars_file),
                "packer_vars": plan.packer_vars,
                "ansible_vars": plan.ansible_vars,
                "note": shown.note,
            }
        )
        return
    # Plain echo: the command and JSON must be copyable, never wrapped.
    click.echo(f"# build {plan.build_id}: stack {plan.stack}, cloud {plan.cloud} (dry run)")
    if shown.note:
        click.echo(f"# {shown.note}")
    click.echo(plan.shell_command())
    click.echo(f"\n# {plan.var_file}")
    click.echo(json.dumps(plan.packer_vars, indent=2, sort_keys=True))
    click.echo(f"\n# {plan.ansible_vars_file}")
    click.echo(json.dumps(plan.ansible_vars, indent=2, sort_keys=True))
