"""``imagectl build``: build a candidate with Packer and record it in the catalog."""

from __future__ import annotations

import click

from imagectl.cli.common import console, emit_json, json_option, workspace


@click.command("build")
@click.option("--stack", required=True, help="Stack to build (images/stacks/NAME.yaml).")
@click.option("--cloud", required=True, type=click.Choice(["aws", "gcp", "azure", "local"]))
@click.option("--skip-provisioning", is_flag=True,
              help="No Ansible provisioning (emulated clouds, where nothing boots).")
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE",
              help="Override a Packer variable (repeatable).")
@click.option("--timeout", type=float, default=4 * 3600.0, show_default=True,
              help="Seconds before the build is cancelled.")
@json_option
@click.pass_context
def command(ctx: click.Context, stack: str, cloud: str, skip_provisioning: bool,
            variables: tuple[str, ...], timeout: float, as_json: bool) -> int:
    """Build one candidate image of STACK on CLOUD, record build and image, tag it built.

    With IMAGECTL_AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL) set, the AWS build talks to
    that endpoint (e.g. a local moto server).
    """
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog
    from imagectl.clouds.common import endpoint_from_env
    from imagectl.errors import UserError
    from imagectl.packer.build import git_commit, new_build_id, run_build
    from imagectl.packer.runner import PackerFailed
    from imagectl.stacks import load_resolved

    ws = workspace(ctx)
    _, resolved = load_resolved(ws.images, stack)
    overrides: dict[str, str] = {}
    for item in variables:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--var '{item}' is not KEY=VALUE", hint="e.g. --var aws_region=us-east-2")
        overrides[key] = value
    if cloud == "aws":
        endpoint = endpoint_from_env(None, "IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL")
        if endpoint:
            overrides.setdefault("aws_endpoint_ec2", endpoint)
    out = console(stderr=as_json)
    build_id = new_build_id()
    catalog = open_catalog()
    with catalog.transaction() as s:
        build = repo.record_build(s, build_id=build_id, stack=stack,
                                  stack_digest=resolved.digest, cloud=cloud,
                                  git_commit=git_commit(ws.root))  # fmt: skip
    out.print(f"build {build_id}: {stack} on {cloud} (digest {resolved.short_digest})")

    def on_event(event: object) -> None:
        level = getattr(event, "ui_level", None)
        if level in ("say", "message", "error"):
            text = getattr(event, "text", "")
            out.print(f"[dim]packer[/] {text}" if level != "error" else f"[red]packer[/] {text}")

    try:
        result = run_build(resolved, cloud, workspace=ws, build_id=build_id,
                           overrides=overrides, skip_provisioning=skip_provisioning,
                           on_event=on_event, timeout=timeout)  # fmt: skip
    except (PackerFailed, KeyboardInterrupt, UserError) as exc:
        outcome = "cancelled" if isinstance(exc, KeyboardInterrupt) else "failed"
        with catalog.transaction() as s:
            repo.finish_build(s, build, outcome=outcome)
        raise
    images = []
    with catalog.transaction() as s:
        repo.finish_build(s, build, outcome="succeeded",
                          artifact_id=",".join(a.id for a in result.artifacts))  # fmt: skip
        for a in result.artifacts:
            repo.record_image(s, build=build, cloud_image_id=a.id, region=a.location,
                              tags=a.tags)  # fmt: skip
            images.append({"image_id": a.id, "region": a.location, "name": a.name})
    if cloud in ("aws", "gcp", "azure"):
        _tag_built(resolved, cloud, result.artifacts)
    payload = {**result.to_dict(), "images": images, "state": "built"}
    if as_json:
        emit_json(payload)
    else:
        for img in images:
            out.print(f"[green]built[/] {img['image_id']} in {img['region']}")
        out.print(f"next: imagectl validate-image {images[0]['image_id']} --cloud {cloud}")
    return 0


def _tag_built(resolved: object, cloud: str, artifacts: list) -> None:
    from imagectl.clouds import get_provider
    from imagectl.clouds.options import provider_options

    provider = get_provider(cloud, **provider_options(resolved, cloud))
    for a in artifacts:
        image = provider.get_image(a.id, a.location)
        if image is not None:
            provider.tag_state(image, "built")
