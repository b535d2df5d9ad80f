"""Shell completion for the values people type most: ``--stack``, ``--shape``, ``--gpu``
and image ids from the catalog.

Click calls these only while completing (``_IMAGECTL_COMPLETE=bash_source imagectl``
prints the script; ``eval`` it in ``~/.bashrc``, or ``zsh_source`` / ``fish_source``), so
``imagectl --help`` imports nothing more. A completer never fails the shell: anything it
cannot read (no workspace, no catalog yet, a database that does not answer) completes
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import click
from click.shell_completion import CompletionItem

# how many image ids one completion offers (newest first)
MAX_IMAGES = 200


def _root(ctx: click.Context) -> str | None:
    root = ctx.find_root().params.get("root")
    return str(root) if root else os.environ.get("IMAGECTL_ROOT")


def _matching(
    values: list[tuple[str, str | None]], incomplete: str, fold: bool = False
) -> list[CompletionItem]:
    def key(v: str) -> str:
        return v.lower() if fold else v

    return [
        CompletionItem(value, help=help_)
        for value, help_ in values
        if key(value).startswith(key(incomplete))
    ]


def _guarded(
    fn: Callable[[click.Context], list[tuple[str, str | None]]],
) -> Callable[[click.Context, click.Parameter, str], list[CompletionItem]]:
    """A completer over ``fn``'s (value, help) pairs that completes nothing on any error."""

    def complete(
        ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        try:
            values = fn(ctx)
        except Exception:  # a completer must never break the user's shell
            return []
        return _matching(values, incomplete, fold=param.name in ("shape", "gpu", "gpus"))

    return complete


def stack_values(ctx: click.Context) -> list[tuple[str, str | None]]:
    from imagectl.paths import find_workspace

    stacks_dir = find_workspace(_root(ctx)).stacks_dir
    return [(p.stem, None) for p in sorted(stacks_dir.glob("*.yaml"))]


def shape_values(ctx: click.Context) -> list[tuple[str, str | None]]:
    from imagectl.core.yamlfast import load_data
    from imagectl.paths import find_workspace

    ws = find_workspace(_root(ctx))
    shapes = load_data(ws.images / "catalog" / "shapes.yaml")["shapes"]
    return [
        (name, f"{s.get('cloud')}: {s.get('gpu_count')}x {s.get('gpu') or 'no GPU'}")
        for name, s in shapes.items()
    ]


def gpu_values(ctx: click.Context) -> list[tuple[str, str | None]]:
    from imagectl.core.yamlfast import load_data
    from imagectl.paths import find_workspace

    ws = find_workspace(_root(ctx))
    gpus = load_data(ws.compat_dir / "gpus.yaml")["gpus"]
    return [(sku, str(g.get("arch") or "")) for sku, g in gpus.items()]


def image_values(ctx: click.Context) -> list[tuple[str, str | None]]:
    """The catalog's images, newest first (a SQLite catalog that does not exist yet is
    not created: nothing to complete)."""
    from sqlalchemy import select

    from imagectl.catalog.db import database_url, open_catalog
    from imagectl.catalog.models import Image

    url = database_url()
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if not os.path.exists(path):
            return []
    catalog = open_catalog(url, migrate_schema=False)
    try:
        with catalog.transaction() as s:
            rows = s.scalars(select(Image).order_by(Image.id.desc()).limit(MAX_IMAGES)).all()
            return [(r.cloud_image_id, f"{r.stack} {r.cloud}/{r.region} {r.state}") for r in rows]
    finally:
        catalog.close()


complete_stacks = _guarded(stack_values)
complete_shapes = _guarded(shape_values)
complete_gpus = _guarded(gpu_values)
complete_images = _guarded(image_values)
