"""``imagectl doctor --stack S --cloud C``: is this account ready for the run? Checked
before anything is spent: credentials, every permission of the run's roles, GPU quota and
capacity for each validation shape, the resources the run writes to, the runner's
address and placeholder ids. One line per finding with what to do."""

from __future__ import annotations

from typing import Any

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    hosts_option,
    json_option,
    runner_cidr_option,
    stack_option,
    workspace,
)
from imagectl.doctor.needs import DEFAULT_ROLES, ROLES
from imagectl.headline import could_not_run

# The account checks a cloud runs, in order; each needs the credentials to work.
ACCOUNT_CHECKS = ("credentials", "permissions", "quota", "capacity", "resources")


def not_checked(found: list[Any], cloud: str) -> list[str]:
    """The account checks that could not run: every one after credentials that failed,
    and each whose finding says it "cannot" read or ask what it needs (a cloud with an
    account only; the local cloud has none)."""
    from imagectl.clouds.account import cloud_checks
    from imagectl.doctor.findings import BLOCKER

    if cloud_checks(cloud) is None:
        return []
    creds = [f for f in found if f.check == "credentials"]
    if not creds or any(f.status == BLOCKER for f in creds):
        ran = {f.check for f in found}
        return [c for c in ACCOUNT_CHECKS[1:] if c not in ran]
    out: list[str] = []
    for f in found:
        if f.check in ACCOUNT_CHECKS and f.message.startswith("cannot "):
            what = f"{f.check} ({f.message[:100]})"
            if what not in out:
                out.append(what)
    return out


@click.command("doctor")
@stack_option("The stack the run is for.", required=True)
@cloud_option("The cloud to check.", required=True, remote_only=True)
@click.option(
    "--role",
    "roles",
    type=click.Choice(ROLES),
    multiple=True,
    help="Roles this identity runs (images/permissions/<cloud>/<role>); default: build "
    "and validate, what the build job does.",
)
@hosts_option("Instances of each validation shape the run launches (quota and capacity).")
@runner_cidr_option(
    "The runner's public address (e.g. 203.0.113.7/32), required with the validate role."
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack: str,
    cloud: str,
    roles: tuple[str, ...],
    hosts: int,
    runner_cidr: str | None,
    as_json: bool,
) -> int:
    """Check an account before a run. Exit 0 when nothing blocks, 1 on a blocker."""
    from imagectl.clouds.account import cloud_checks
    from imagectl.clouds.registry import cloud_spec
    from imagectl.doctor.findings import blockers
    from imagectl.doctor.run import diagnose
    from imagectl.packer.plugins import packer_plugins

    ws = workspace(ctx)
    chosen = tuple(dict.fromkeys(roles or DEFAULT_ROLES))
    packer = packer_plugins(cloud_spec(cloud).packer_dir(ws.images)) if "build" in chosen else None
    found = diagnose(
        ws,
        stack,
        cloud,
        cloud_checks(cloud),
        roles=chosen,
        hosts=hosts,
        runner_cidr=runner_cidr,
        packer=packer,
    )
    bad = blockers(found)
    not_run = not_checked(found, cloud)
    headline = could_not_run(len(ACCOUNT_CHECKS), not_run, "account checks")
    if headline and not any("(" in n for n in not_run):
        headline += " (they need the credentials, which failed)"
    if as_json:
        emit_json(
            {
                "stack": stack,
                "cloud": cloud,
                "ready": not bad,
                "complete": not not_run,
                "headline": headline,
                "not_checked": not_run,
                "findings": [f.as_dict() for f in found],
            }
        )
    else:
        out = console()
        if headline:  # first: the lines below are not the whole account
            out.print(headline, markup=False, highlight=False, soft_wrap=True)
        for f in found:
            out.print(f.line(), markup=False, highlight=False, soft_wrap=True)
        out.print(
            f"{len(bad)} blocker(s): fix them before building"
            if bad
            else f"ready: {stack} on {cloud}",
            markup=False,
            highlight=False,
        )
    return 1 if bad else 0
