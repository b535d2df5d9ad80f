"""``imagectl build --stack S --cloud C [--dry-run]``: build one candidate image with Packer.

Resolves the stack, writes ``<stack>.<cloud>.pkrvars.json`` and
``<stack>.<cloud>.ansible.json`` into the build folder (``--var-dir`` or
``<state dir>/builds/<build id>``) and runs ``packer build`` through imagectl's wrapper,
printing progress and, at the end, the artifacts from Packer's manifest. ``--dry-run``
prints the exact command and variables instead of running it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    workspace,
)


@click.command("build")
@stack_option("Stack name (images/stacks/<name>.yaml).", dest="stack_name", required=True)
@cloud_option("Which template set.", required=True)
@click.option("--dry-run", is_flag=True, help="Print the packer command and variables only.")
@click.option(
    "--var-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the var files, logs and manifest (default: a new build folder).",
)
@click.option("--build-id", help="Use this build id instead of a new one.")
@click.option(
    "--timeout",
    "timeout_min",
    type=click.FloatRange(min=1),
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
    help="No communicator and no Ansible (only for emulated clouds such as moto).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack_name: str,
    cloud: str,
    dry_run: bool,
    var_dir: Path | None,
    build_id: str | None,
    timeout_min: float,
    overrides: tuple[str, ...],
    skip_provisioning: bool,
    as_json: bool,
) -> None:
    """Build a candidate image of STACK for CLOUD with Packer."""
    from imagectl.errors import UserError
    from imagectl.stacks import load_resolved

    ws = workspace(ctx)
    _, resolved = load_resolved(ws.images, stack_name)
    extra = _parse_overrides(overrides, UserError)
    _check_override_names(extra, ws.packer_dir(cloud), cloud, UserError)
    if dry_run:
        _dry_run(ws, resolved, cloud, var_dir, build_id, extra, skip_provisioning, as_json)
        return
    from imagectl.clouds import build_records
    from imagectl.packer.build import check_build_id, git_commit, new_build_id, run_build

    extra = build_records.endpoint_overrides(cloud, extra)
    build_records.prepare(resolved, cloud)
    build_id = check_build_id(build_id) if build_id else new_build_id()
    record = build_records.start(resolved, cloud, build_id, git_commit(ws.root))
    out = console(stderr=True)

    def progress(event: Any) -> None:
        if event.type == "ui" and event.ui_level in ("say", "message", "error"):
            style = "red" if event.is_error else None
            for line in event.text.splitlines() or [""]:
                out.print(line, style=style, markup=False)

    try:
        result = run_build(
            resolved,
            cloud,
            workspace=ws,
            build_id=build_id,
            var_dir=var_dir,
            overrides=extra,
            skip_provisioning=skip_provisioning,
            on_event=progress,
            timeout=timeout_min * 60,
        )
    except (Exception, KeyboardInterrupt) as exc:
        build_records.failed(record, cancelled=isinstance(exc, KeyboardInterrupt))
        raise
    images = build_records.finish(record, resolved, cloud, result.artifacts)
    if as_json:
        emit_json({**result.to_dict(), "images": images})
        return
    con = console()
    con.print(f"build {result.plan.build_id}: {len(result.artifacts)} artifact(s)")
    for a in result.artifacts:
        con.print(f"  {a.cloud} {a.location} {a.id}", markup=False)
    con.print(f"  manifest: {result.plan.manifest_file}", markup=False)


def _parse_overrides(items: tuple[str, ...], error: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise error(f"--var '{item}' is not NAME=VALUE", hint="e.g. --var aws_region=us-west-2")
        out[name] = value
    return out


def _check_override_names(extra: dict[str, str], folder: Path, cloud: str, error: Any) -> None:
    """``--var NAME=...`` names a variable the cloud's templates declare."""
    import difflib

    from imagectl.lint import declared_packer_vars

    declared = declared_packer_vars(folder)
    for name in extra:
        if declared and name not in declared:
            near = difflib.get_close_matches(name, sorted(declared), n=1)
            raise error(
                f"--var {name[:80]!r}: no such variable in the {cloud} templates ({folder})",
                hint=f"Did you mean '{near[0]}'?" if near else "See variables.pkr.hcl there",
            )


def _dry_run(
    ws: Any,
    resolved: Any,
    cloud: str,
    var_dir: Path | None,
    build_id: str | None,
    extra: dict[str, str],
    skip_provisioning: bool,
    as_json: bool,
) -> None:
    from imagectl.errors import UserError
    from imagectl.packer.binary import find_packer
    from imagectl.packer.build import plan_build

    note = ""
    try:
        binary = find_packer()
    except UserError as exc:
        binary = None
        note = f"packer not usable here ({exc.message}); command shown for Packer >= 1.7"
    plan = plan_build(
        resolved,
        cloud,
        workspace=ws,
        build_id=build_id,
        var_dir=var_dir,
        binary=binary,
        overrides=extra,
        skip_provisioning=skip_provisioning,
        validator_wheel="<built at run time: pip wheel --no-deps>",
    )
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
                "note": note,
            }
        )
        return
    # Plain echo: the command and JSON must be copyable, never wrapped.
    click.echo(f"# build {plan.build_id}: stack {plan.stack}, cloud {plan.cloud} (dry run)")
    if note:
        click.echo(f"# {note}")
    click.echo(plan.shell_command())
    click.echo(f"\n# {plan.var_file}")
    click.echo(json.dumps(plan.packer_vars, indent=2, sort_keys=True))
    click.echo(f"\n# {plan.ansible_vars_file}")
    click.echo(json.dumps(plan.ansible_vars, indent=2, sort_keys=True))
