"""``imagectl validate-image``: boot a candidate on its GPU shape, validate, decide.

Parses the options and calls the validation stage (``imagectl.validation.stage``), then
prints its result."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import click

from imagectl.catalog.lifecycle import ImageState
from imagectl.cli.common import (
    cloud_option,
    console,
    hosts_option,
    json_option,
    runner_cidr_option,
    stack_option,
    workspace,
)
from imagectl.cli.completion import complete_images
from imagectl.core.commandtext import say
from imagectl.core.numbers import WEEK_S, Bounded
from imagectl.core.output import show
from imagectl.core.safetext import cell, cells, markup
from imagectl.validation.progress import Reporter, RichReporter
from imagectl.validators.commands.options import (
    junit_option,
    profile_option,
    sandbox_option,
    shape_option,
)


@click.command("validate-image")
@click.argument("image_id", shell_complete=complete_images)
@cloud_option("The cloud the image is in (local: a QEMU VM on this machine).", required=True)
@stack_option("The image's stack (default: from the catalog).")
@shape_option("Machine shape (default: the stack's first validation shape).")
@hosts_option("Instances to validate in parallel.")
@click.option(
    "--nodes",
    type=click.IntRange(1, 64),
    help="Hosts validated together: launched in the cloud's placement (AWS cluster "
    "placement group, GCP compact placement policy, Azure proximity placement group), each "
    "validated alone, then collectives across them (default: the stack's validation.nodes).",
)
@profile_option("Validator profile (default: the stack's validation.profile).")
@click.option(
    "--location",
    "locations",
    multiple=True,
    help="Zone/region to try, in order (default: every zone the stack allows).",
)
@click.option(
    "--ttl",
    "ttl_h",
    type=Bounded(0.1, 48, unit="hours"),
    default=3.0,
    show_default=True,
    help="Hours after which `imagectl reap` terminates a leftover instance.",
)
@click.option(
    "--max-retries",
    type=click.IntRange(0, 5),
    default=2,
    show_default=True,
    help="Fresh hosts tried for a host (hardware) problem.",
)
@click.option(
    "--reach-timeout",
    type=Bounded(1, WEEK_S, unit="seconds"),
    default=900.0,
    show_default=True,
    help="Seconds to wait for an instance to become reachable.",
)
@click.option(
    "--validator-timeout",
    type=Bounded(1, WEEK_S, unit="seconds"),
    default=1800.0,
    show_default=True,
    help="Seconds the validator may run on a host.",
)
@runner_cidr_option(
    "The runner's address (e.g. 203.0.113.7/32): the only source SSH admits; "
    "required on AWS, Google Cloud and Azure unless the inventory override runs the hosts "
    "here (ansible_connection: local). The SSH user is the cloud's own (ubuntu on "
    "Canonical AMIs, imagectl on Google Cloud and Azure, root on the local cloud).",
)
@click.option(
    "--ssh-key",
    type=click.Path(dir_okay=False),
    help="Private key (default: a fresh ed25519 key for this run).",
)
@click.option(
    "--inventory-override",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML host vars (all / slots / default_slot), e.g. test mode with "
    "ansible_connection=local and replay snapshots.",
)
@click.option(
    "--receipts-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write every host's receipt here (<host>.json), e.g. for CI artifacts.",
)
@junit_option(
    "Also write JUnit XML here: the decision and a test case per host, then every "
    "host's receipt check by check (like validate --junit), for CI."
)
@click.option("--wheel", help="imagectl wheel to ship to the hosts (default: the image's own).")
@sandbox_option(
    "A try-it run whose hosts replay snapshots (--inventory-override): the receipts say "
    "they are sandbox replays, which the promotion gate accepts and records. Only for an "
    "emulated cloud (its endpoint variable naming this machine's loopback): exit 2 on a "
    "real one, whose gate refuses sandbox receipts."
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    image_id: str,
    cloud: str,
    stack: str | None,
    shape: str | None,
    hosts: int,
    nodes: int | None,
    profile: str | None,
    locations: tuple[str, ...],
    ttl_h: float,
    max_retries: int,
    reach_timeout: float,
    validator_timeout: float,
    runner_cidr: str | None,
    ssh_key: str | None,
    inventory_override: Path | None,
    receipts_dir: Path | None,
    junit: Path | None,
    sandbox: bool,
    wheel: str | None,
    as_json: bool,
) -> int:
    """Launch HOSTS instances of IMAGE_ID, run the validator on each, decide.

    validated (exit 0): every host passed. blocked (exit 1): every host failed the same
    image-level check. inconclusive (exit 1): no usable verdict (no capacity, quota, a
    host unreachable, the validator crashed, a foreign receipt, host problems that
    retries did not clear). Instances are always terminated.
    """
    # The stage pulls in the catalog (SQLAlchemy): loaded here so `--help` stays light.
    from imagectl.clouds.registry import cloud_spec
    from imagectl.validation.stage import ImageValidationRequest, validate_image

    scratch = contextlib.ExitStack()
    if junit is not None and receipts_dir is None:  # the JUnit file is made of the receipts
        receipts_dir = Path(scratch.enter_context(tempfile.TemporaryDirectory()))
    req = ImageValidationRequest(
        image_id=image_id,
        spec=cloud_spec(cloud),
        stack=stack,
        shape=shape,
        hosts=hosts,
        nodes=nodes,
        profile=profile,
        locations=locations,
        ttl_h=ttl_h,
        max_retries=max_retries,
        reach_timeout_s=reach_timeout,
        validator_timeout_s=validator_timeout,
        runner_cidr=runner_cidr,
        ssh_key=ssh_key,
        inventory_override=inventory_override,
        wheel=wheel,
        sandbox=sandbox,
        receipts_dir=receipts_dir,
    )
    reporter = Reporter() if as_json else RichReporter(console())
    with scratch:
        outcome = validate_image(workspace(ctx), req, reporter)
        payload = outcome.to_dict()  # the JSON edge: --json, the table, the JUnit file
        if junit is not None:
            assert receipts_dir is not None
            _write_junit(junit, payload, receipts_dir)
    show(as_json, payload, lambda: _render(payload))
    leaked = outcome.termination_errors
    if leaked:  # an instance that may still run (and bill): never a clean exit
        say(
            console(stderr=True),
            f"error: {len(leaked)} instance(s) could not be terminated: "
            + "; ".join(f"{i}: {e}" for i, e in leaked.items())
            + ". Terminate them in the cloud's console, or run `imagectl reap` (their TTL "
            "tag marks them for it).",
        )
        return 1
    return 0 if outcome.state == ImageState.VALIDATED else 1


def _write_junit(path: Path, payload: dict[str, Any], receipts_dir: Path) -> None:
    from imagectl import junit
    from imagectl.validators.receipt import load_receipt

    receipts = {
        h["host"]: load_receipt(receipts_dir / f"{h['host']}.json")
        for h in payload["hosts"]
        if (receipts_dir / f"{h['host']}.json").is_file()
    }
    junit.write(path, junit.validate_image_junit(payload, receipts))


def _render(payload: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    out.print()
    table = Table(title=cell(f"{payload['image_id']} on {payload['shape']}"))
    for col in ("host", "verdict", "worst action", "failed checks", "problem"):
        table.add_column(col)
    for h in payload["hosts"]:
        table.add_row(  # a receipt is the host's words: printed literally
            *cells(
                h["host"],
                h["verdict"] or "-",
                h["worst_action"] or "-",
                ", ".join(h["failed_checks"]) or "-",
                h["problem"] or "-",
            )
        )
    out.print(table)
    for bad in payload["bad_hosts"]:
        out.print(f"[yellow]bad host[/] {markup(bad['host'])}: "
                  f"{markup(', '.join(bad['failed_checks']))}")  # fmt: skip
    for shape, fabric in (payload.get("fabric") or {}).items():
        for check_id, c in fabric["checks"].items():
            measured = f" ({c['measured']})" if c["measured"] is not None else ""
            out.print(cell(f"fabric {shape}: {check_id} {c['outcome']}{measured}: {c['message']}"))
    colour = {"validated": "green", "blocked": "red"}.get(payload["state"], "yellow")
    out.print(f"[bold {colour}]{payload['state']}[/]: {markup('; '.join(payload['reasons']))}")
    out.print(cell(f"terminated: {', '.join(payload['terminated']) or 'none'}"))
    kind = payload.get("receipts")
    if kind == "sandbox replay":
        out.print(
            "[yellow]receipts: sandbox replays[/] of recorded snapshots (--sandbox), not runs "
            "on the image; the gate accepts them and records that it did"
        )
    elif kind == "replay":
        out.print(
            "[yellow]receipts: replays[/] of recorded snapshots, not runs on the image: the "
            "promotion gate refuses them (pass --sandbox for a try-it run)"
        )
