"""imagectl drift"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import click

from imagectl.cli.common import console, json_option, stack_option, workspace
from imagectl.core.errors import EXIT_FAILED, EXIT_OK

SOURCES = ("upstream", "base-images", "replicas", "fleet", "hosts")


@click.command("drift")
@stack_option("Only this stack (repeatable).", dest="stacks", multiple=True)
@click.option("--upstream", is_flag=True, help="Newer packages upstream, branch end of life.")
@click.option(
    "--base-images",
    is_flag=True,
    help="A newer base image than the stack builds on (its pin or its promoted build's), "
    "with the pin that would take it.",
)
@click.option("--replicas", is_flag=True, help="Promoted images missing/failed per region.")
@click.option("--fleet", is_flag=True, help="Running instances not on the current image.")
@click.option(
    "--hosts",
    "hosts_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of boot-check receipts from fleet nodes, or 'catalog' for the receipts the "
    "catalog holds (the default when every source is checked).",
)
@click.option(
    "--manifest",
    "manifests",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Image manifest JSON (/etc/imagectl/manifest.json) to compare receipts with.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
)
@json_option
@click.option("--write", is_flag=True, help="Rewrite stack files with the proposed upstream pins.")
@click.option(
    "--as-of",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Judge branch lifecycles as of this date (default: today).",
)
@click.option(
    "--nvidia-repo-url",
    envvar="IMAGECTL_NVIDIA_REPO_URL",
    help="Base of NVIDIA's CUDA repositories (a mirror, or file:// for tests).",
)
@click.pass_context
def command(
    ctx: click.Context,
    stacks: tuple[str, ...],
    upstream: bool,
    base_images: bool,
    replicas: bool,
    fleet: bool,
    hosts_dir: Path | None,
    manifests: tuple[Path, ...],
    fmt: str,
    as_json: bool,
    write: bool,
    as_of: dt.datetime | None,
    nvidia_repo_url: str | None,
) -> None:
    """Report drift: upstream releases, newer base images, replicas, fleet and hosts (all
    sources by default).

    Reports per stack and per check. A check that cannot run (an unreachable index, a
    cloud without credentials) is an error of that stack in the report ("errors", and each
    check's "status"), beside what the other checks found. Exits 0 when every check ran
    and found no drift, 1 when drift was found or a check could not run, 2 on bad input
    (unknown stack, malformed stack file). --write rewrites the stack file with the
    proposed pins that pass the compatibility rules, keeping comments and layout.
    """
    from imagectl.drift import report as render
    from imagectl.drift.run import DriftOptions, run

    hosts_on = hosts_dir is not None
    if hosts_dir is not None and str(hosts_dir) == "catalog" and not hosts_dir.is_dir():
        hosts_dir = None  # the catalog's receipts

    chosen = tuple(
        s
        for s, on in zip(SOURCES, (upstream, base_images, replicas, fleet, hosts_on), strict=True)
        if on
    )
    opts = DriftOptions(
        sources=chosen or SOURCES,
        stacks=stacks,
        as_of=as_of.date() if as_of else dt.date.today(),
        nvidia_repo_url=nvidia_repo_url,
        hosts_dir=hosts_dir,
        manifests=manifests,
        write=write,
    )
    report = run(workspace(ctx), opts)
    if as_json or fmt == "json":
        sys.stdout.write(render.render_json(report))
    elif fmt == "markdown":
        sys.stdout.write(render.render_markdown(report))
    else:
        render.render_table(report, console())
    sys.exit(EXIT_FAILED if report.drifted or not report.complete else EXIT_OK)
