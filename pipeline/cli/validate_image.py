"""``imagectl validate-image``: boot a candidate on its GPU shape, validate, decide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from imagectl.catalog.lifecycle import ImageState
from imagectl.cli.common import (
    REMOTE_CLOUDS,
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    workspace,
)


def _stack_of(cloud: str, image_id: str) -> str | None:
    """The stack the catalog records for this image, if the catalog knows it."""
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    catalog = open_catalog()
    with catalog.transaction() as s:
        for row in repo.list_images(s, cloud=cloud):
            if row.cloud_image_id == image_id:
                return str(row.stack)
    return None


def _ssh_key(path: str | None, needed: bool, folder: Path) -> tuple[str | None, str | None]:
    """(private key path, public key text): the given key, or a fresh one for this run."""
    import shutil
    import subprocess

    if path:
        pub = Path(path + ".pub")
        if not pub.is_file():
            from imagectl.errors import UserError

            raise UserError(f"no public key next to {path}", hint=f"Expected {pub}")
        return path, pub.read_text().strip()
    if not needed or not shutil.which("ssh-keygen"):
        return None, None
    key = folder / "id_ed25519"
    subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "imagectl-validation",
            "-f",
            str(key),
        ],
        check=True,
        capture_output=True,
    )
    return str(key), (folder / "id_ed25519.pub").read_text().strip()


@click.command("validate-image")
@click.argument("image_id")
@cloud_option("The cloud the image is in.", required=True, choices=REMOTE_CLOUDS)
@stack_option("The image's stack (default: from the catalog).")
@click.option("--shape", help="Machine shape (default: the stack's first validation shape).")
@click.option(
    "--hosts",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Instances to validate in parallel.",
)
@click.option(
    "--profile",
    type=click.Choice(["boot", "quick", "full", "burn"]),
    help="Validator profile (default: the stack's validation.profile).",
)
@click.option(
    "--location",
    "locations",
    multiple=True,
    help="Zone/region to try, in order (default: every zone the stack allows).",
)
@click.option(
    "--ttl",
    "ttl_h",
    type=click.FloatRange(0.1, 48),
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
    type=float,
    default=900.0,
    show_default=True,
    help="Seconds to wait for an instance to become reachable.",
)
@click.option(
    "--validator-timeout",
    type=float,
    default=1800.0,
    show_default=True,
    help="Seconds the validator may run on a host.",
)
@click.option(
    "--runner-cidr",
    envvar="IMAGECTL_RUNNER_CIDR",
    help="The runner's address (e.g. 203.0.113.7/32): the only source SSH admits.",
)
@click.option("--ssh-user", default="ubuntu", show_default=True)
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
@click.option("--wheel", help="imagectl wheel to ship to the hosts (default: the image's own).")
@click.option(
    "--sandbox",
    is_flag=True,
    help="A try-it run whose hosts replay snapshots (--inventory-override): the receipts say "
    "they are sandbox replays, which the promotion gate accepts and records.",
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
    profile: str | None,
    locations: tuple[str, ...],
    ttl_h: float,
    max_retries: int,
    reach_timeout: float,
    validator_timeout: float,
    runner_cidr: str | None,
    ssh_user: str,
    ssh_key: str | None,
    inventory_override: Path | None,
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
    import shutil
    import tempfile

    from imagectl.clouds import get_provider
    from imagectl.clouds.options import provider_options
    from imagectl.errors import UserError
    from imagectl.stacks import load_resolved
    from imagectl.validation.inventory import InventoryOverride
    from imagectl.validation.signals import interrupts_raise

    # Local input first: a bad override file is exit 2 before any cloud call.
    override = InventoryOverride.load(inventory_override) if inventory_override else None
    ws = workspace(ctx)
    stack = stack or _stack_of(cloud, image_id)
    if not stack:
        raise UserError(
            f"image {image_id} is not in the catalog, so its stack is unknown",
            hint="Pass --stack NAME (the stack it was built from)",
        )
    _, resolved = load_resolved(ws.images, stack)
    options = provider_options(resolved, cloud)
    provider = get_provider(cloud, **options)
    settings = getattr(resolved.stack.clouds, cloud)
    region = {"aws": options.get("region"), "azure": options.get("location")}.get(cloud, "")
    image = provider.get_image(image_id, region or "")
    if image is None:
        raise UserError(
            f"image {image_id} was not found in {cloud}" + (f" region {region}" if region else ""),
            hint="Check the id with `imagectl status` or the cloud console",
        )
    from imagectl.tags import TAG_DIGEST, gcp_label_value

    tagged = image.tags.get(TAG_DIGEST)
    if tagged and tagged not in (resolved.digest, gcp_label_value(resolved.digest)):
        raise UserError(
            f"image {image_id} was built from stack digest {tagged[:12]}, but "
            f"{stack} now resolves to {resolved.short_digest}",
            hint="Build a new candidate from the current stack",
        )
    shape = shape or settings.validation_shapes[0]
    profile = profile or resolved.stack.validation.profile
    from imagectl.stacks.expectations import for_shape

    expect = for_shape(ws.images, resolved, shape).model_dump(mode="json")
    # The run's own key: a 0700 folder (mkdtemp), removed however the run ends (SIGTERM
    # too: it is raised as an interrupt while the run holds the key).
    keydir = Path(tempfile.mkdtemp(prefix="imagectl-key-"))
    try:
        with interrupts_raise():
            return _validate_with_key(
                keydir, ssh_key, override, cloud, provider, image, resolved, stack, shape,
                expect, profile, hosts, ttl_h, locations, max_retries, reach_timeout,
                validator_timeout, runner_cidr, ssh_user, wheel, sandbox, as_json,
            )  # fmt: skip
    finally:
        shutil.rmtree(keydir, ignore_errors=True)


def _validate_with_key(
    keydir: Path,
    ssh_key: str | None,
    override: Any,
    cloud: str,
    provider: Any,
    image: Any,
    resolved: Any,
    stack: str,
    shape: str,
    expect: dict[str, Any],
    profile: str,
    hosts: int,
    ttl_h: float,
    locations: tuple[str, ...],
    max_retries: int,
    reach_timeout: float,
    validator_timeout: float,
    runner_cidr: str | None,
    ssh_user: str,
    wheel: str | None,
    sandbox: bool,
    as_json: bool,
) -> int:
    import datetime as dt

    from imagectl.actor import current_actor
    from imagectl.validation.progress import Reporter, RichReporter
    from imagectl.validation.records import CatalogRecorder
    from imagectl.validation.run import ValidationRequest, ValidationRun

    private_key, public_key = _ssh_key(ssh_key, not (override and override.local), keydir)

    recorder = CatalogRecorder()
    recorder.start(
        cloud=cloud,
        region=image.region,
        image_id=image.image_id,
        stack=stack,
        digest=resolved.digest,
        tags=image.tags,
    )
    provider.tag_state(image, ImageState.VALIDATING)
    request = ValidationRequest(
        image=image,
        stack=stack,
        stack_digest=resolved.digest,
        shape=shape,
        expect=expect,
        hosts=hosts,
        profile=profile,
        ttl=dt.timedelta(hours=ttl_h),
        locations=list(locations) or None,
        max_host_retries=max_retries,
        reach_timeout_s=reach_timeout,
        validator_timeout_s=validator_timeout,
        allowed_cidr=runner_cidr,
        ssh_user=ssh_user,
        ssh_private_key=private_key,
        ssh_public_key=public_key,
        launched_by=current_actor(),
        override=override,
        wheel=wheel or "",
        sandbox=sandbox,
    )
    reporter = Reporter() if as_json else RichReporter(console())

    def record(outcome: Any) -> None:
        recorder.receipt(outcome, shape=shape, profile=profile)

    run = ValidationRun(provider, request, reporter=reporter, on_receipt=record)
    try:
        with reporter:
            result = run.run()
    except KeyboardInterrupt:
        from imagectl.validation.decide import INCONCLUSIVE, Decision

        recorder.finish(Decision(INCONCLUSIVE, ["the run was interrupted"]))
        provider.tag_state(image, ImageState.INCONCLUSIVE)
        raise
    state = recorder.finish(result.decision)
    provider.tag_state(image, state)
    payload = {
        "image_id": image.image_id,
        "cloud": cloud,
        "stack": stack,
        "shape": shape,
        "state": state,
        "receipts": _receipt_kind(override, sandbox),
        **result.to_dict(),
    }
    if as_json:
        emit_json(payload)
    else:
        _render(payload)
    return 0 if state == ImageState.VALIDATED else 1


def _receipt_kind(override: Any, sandbox: bool) -> str:
    """live (hosts booted from the image) or replay (test-mode hosts replaying snapshots)."""
    replays = override is not None and any(
        override.for_slot(i).get("validate_snapshot") for i in range(len(override.slots) + 1)
    )
    if not replays:
        return "live"
    return "sandbox replay" if sandbox else "replay"


def _render(payload: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    out.print()
    table = Table(title=f"{payload['image_id']} on {payload['shape']}")
    for col in ("host", "verdict", "worst action", "failed checks", "problem"):
        table.add_column(col)
    for h in payload["hosts"]:
        table.add_row(
            h["host"],
            h["verdict"] or "-",
            h["worst_action"] or "-",
            ", ".join(h["failed_checks"]) or "-",
            h["problem"] or "-",
        )
    out.print(table)
    for bad in payload["bad_hosts"]:
        out.print(f"[yellow]bad host[/] {bad['host']}: {', '.join(bad['failed_checks'])}")
    colour = {"validated": "green", "blocked": "red"}.get(payload["state"], "yellow")
    out.print(f"[bold {colour}]{payload['state']}[/]: {'; '.join(payload['reasons'])}")
    out.print(f"terminated: {', '.join(payload['terminated']) or 'none'}")
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
