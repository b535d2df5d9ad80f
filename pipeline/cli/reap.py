"""``imagectl reap``: terminate imagectl instances whose TTL expired."""

from __future__ import annotations

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
from imagectl.cloud_names import REMOTE_CLOUDS


@click.command("reap")
@cloud_option(
    "Cloud(s) to sweep (default: every cloud of every stack).",
    dest="clouds",
    multiple=True,
    choices=REMOTE_CLOUDS,
)
@stack_option(
    "Take accounts/projects/regions from these stacks (default: all).",
    dest="stacks",
    multiple=True,
)
@click.option("--dry-run", is_flag=True, help="List what would be terminated; change nothing.")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    clouds: tuple[str, ...],
    stacks: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> int:
    """Terminate every instance tagged imagectl:managed whose imagectl:expires-at passed.

    Exit 0 when everything expired was terminated (or nothing was), 1 when a
    termination or a cloud listing failed.
    """
    from imagectl.clouds.options import provider_options
    from imagectl.clouds.reap import reap
    from imagectl.clouds.registry import get_provider
    from imagectl.stacks import load_resolved, stack_paths

    ws = workspace(ctx)
    names = list(stacks) or [p.stem for p in stack_paths(ws.stacks_dir)]
    seen: set[tuple[str, str]] = set()
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    for name in names:
        _, resolved = load_resolved(ws.images, name)
        for cloud in clouds or REMOTE_CLOUDS:
            if getattr(resolved.stack.clouds, cloud, None) is None:
                continue
            options = provider_options(resolved, cloud)
            key = (cloud, repr(sorted((k, str(v)) for k, v in options.items())))
            if key in seen:
                continue
            seen.add(key)
            try:
                provider = get_provider(cloud, **options)
                results.extend(r.to_dict() for r in reap(provider, dry_run=dry_run))
            except Exception as exc:
                errors.append(f"{cloud} ({name}): {type(exc).__name__}: {exc}")
    # The same instance can be listed through two stacks sharing an account: report once.
    unique = list({(r["cloud"], r["instance_id"]): r for r in results}.values())
    failed = [r for r in unique if r["action"] == "failed"]
    if as_json:
        emit_json({"dry_run": dry_run, "instances": unique, "errors": errors})
    else:
        out = console()
        if not unique:
            out.print("no expired imagectl instances")
        for r in unique:
            out.print(
                f"{r['action']:16} {r['cloud']:5} {r['instance_id']} ({r['location']}, "
                f"stack {r['stack']}, expired {r['expires_at']}) {r['error']}"
            )
        for e in errors:
            out.print(f"[red]error[/] {e}")
    return 1 if failed or errors else 0
