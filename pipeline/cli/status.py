"""``imagectl status``: what the catalog knows, per stack and cloud.

For each stack and cloud: the current image of every region (the "latest" pointers, with
the previous one), candidates (built, validating, validated), blocked images with their
reasons, and the latest events. Every image shows which validation shapes it passed: the
stack's ``validation_shapes`` on that cloud, each with the newest receipt's verdict
("pass", "fail", or "missing" without a receipt), and a shape the stack does not name
marked as such (the gate ignores it). Tables list at most ``--limit`` candidates and
blocked images (newest first, 10 without it); ``--json`` prints one JSON object, every
candidate and blocked image unless ``--limit`` is given (then the newest N, as in the
tables, and ``hidden`` counts the rest)::

    {"database": URL, "limit": N or null, "stacks": [{"stack", "cloud", "validation_shapes",
      "current": [...], "candidates": [...], "blocked": [...], "partial": [...],
      "events": [...], "hidden": {"candidates": n, "blocked": n}}]}

``partial`` lists every image part way through a promotion (``partially_promoted``, or
``promoting`` while one runs or after a killed one) with ``regions_reached``,
``regions_missing``, the last error of each missing region and the ``resume`` command.

where each image carries ``shapes`` (per recorded shape: verdict, worst action, host,
profile, mode, time), ``shapes_passed`` and ``shapes_missing`` (the stack's shapes without
a passing newest receipt; null when the stack file is not in this workspace).

An empty catalog prints "no images yet" and exits 0. The data comes from
``imagectl.promotion.query.catalog_status``; the catalog (and SQLAlchemy) is imported only
when the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from imagectl.cli.common import (
    cloud_option,
    console,
    emit_json,
    json_option,
    stack_option,
    workspace,
)
from imagectl.headline import could_not_run

if TYPE_CHECKING:
    from rich.console import Console


def _state(img: dict[str, Any]) -> str:
    """The state, marked when the receipts behind it are replays, and when revoked."""
    by = img.get("validated_by")
    state = f"{img['state']} ({by})" if by and by != "live" else str(img["state"])
    return f"{state}, revoked" if img.get("revoked") else state


def _validation_shapes(
    ctx: click.Context, stack: str, cloud: str, not_run: list[str] | None = None
) -> list[str] | None:
    """The shapes the stack validates on ``cloud`` (None: no such stack file or cloud in
    this workspace, e.g. a catalog shared with another checkout; the reason goes into
    ``not_run``: which images lack a shape cannot be judged)."""
    from imagectl.clouds.registry import cloud_spec
    from imagectl.core.errors import UserError
    from imagectl.stacks.loader import find_stack, load_stack

    try:
        model = load_stack(find_stack(workspace(ctx).stacks_dir, stack)).stack
        return list(cloud_spec(cloud).settings(model).validation_shapes)
    except UserError as exc:
        if not_run is not None:
            not_run.append(f"the shapes of {stack} on {cloud} ({exc.message.rstrip('.')})")
        return None


def _annotate(img: dict[str, Any], required: list[str] | None) -> None:
    """Which of the stack's shapes the image passed, and which it still lacks."""
    passed = [s["shape"] for s in img["shapes"] if s["passed"]]
    img["shapes_passed"] = passed
    img["shapes_missing"] = None if required is None else [s for s in required if s not in passed]


def _shapes_cell(img: dict[str, Any], required: list[str] | None) -> str:
    """``g6.xlarge pass, g5.xlarge missing``: the stack's shapes first, then any other. A
    copy shows its source's verdicts, saying so."""
    newest = {s["shape"]: s["verdict"] for s in img["shapes"]}
    order = list(required or []) + sorted(set(newest) - set(required or []))
    cells = []
    for shape in order:
        verdict = newest.get(shape, "missing")
        extra = " (not in the stack)" if required is not None and shape not in required else ""
        cells.append(f"{shape} {verdict}{extra}")
    text = ", ".join(cells) or "-"
    source = img.get("copy_of")
    return f"{text} (of its source)" if source and cells else text


def _image_cell(img: dict[str, Any]) -> str:
    """The image id; a copy is named as one, with the image it copies."""
    source = img.get("copy_of")
    if not source:
        return str(img["cloud_image_id"])
    return f"{img['cloud_image_id']} (copy of {source['cloud_image_id']} in {source['region']})"


def _short(iso: str | None) -> str:
    return iso[:19].replace("T", " ") if iso else "-"


def _more(out: Console, hidden: int, what: str) -> None:
    if hidden > 0:
        out.print(f"  ... and {hidden} more {what} (newest shown first; --limit or --json for all)")


def _render(stacks: list[dict[str, Any]], database: str, limit: int) -> None:
    from rich.table import Table

    from imagectl.core.safetext import cell, cells, markup, one_line

    out = console()
    out.print(f"[dim]catalog: {markup(database)}[/]")
    for entry in stacks:
        out.print()
        out.print(f"[bold]{markup(entry['stack'])}[/] on [bold]{markup(entry['cloud'])}[/]")
        required = entry.get("validation_shapes")
        if required:
            out.print(cell(f"  validation shapes: {', '.join(required)}"), soft_wrap=True)
        flip = entry.get("unfinished_flip")
        if flip:
            out.print(
                f"  [red]pointer flip of promotion {flip['promotion']} "
                f"({markup(flip['image'])}) unfinished[/]: "
                + markup(
                    f"moved in {', '.join(flip['done']) or 'no region'}, not yet in "
                    f"{', '.join(flip['pending'])}. Finish: {flip['finish']}; undo: {flip['undo']}"
                ),
                soft_wrap=True,
            )
        if entry["current"]:
            table = Table(title="current (latest per region)", title_justify="left")
            for col in ("region", "image", "state", "shapes", "since", "previous"):
                table.add_column(col)
            for row in entry["current"]:
                prev = row["previous"]
                table.add_row(
                    *cells(
                        row["region"],
                        _image_cell(row["image"]),
                        _state(row["image"]),
                        _shapes_cell(row["image"], required),
                        _short(row["updated_at"]),
                        prev["cloud_image_id"] if prev else "-",
                    )
                )
            out.print(table)
        else:
            out.print("  no region has a current image yet")
        for row in entry.get("canary", []):
            out.print(
                cell(f"  canary in {row['region']}: {row['cloud_image_id']} "
                     f"({row['image_state']}, since {_short(row['since'])})"),
                soft_wrap=True,
            )  # fmt: skip
        for row in entry.get("rollouts", [])[:1]:
            colour = {"advance": "green", "hold": "yellow", "rollback": "red"}[row["decision"]]
            out.print(
                f"  last rollout ({row['id']}, {_short(row['at'])}): "
                f"[{colour}]{row['decision']}[/] "
                + markup(
                    one_line(
                        f"{row['candidate'] or '?'}: {row['reason']}; applied: {row['applied']}"
                    )
                ),
                soft_wrap=True,
            )
        if entry["candidates"]:
            table = Table(title="candidates", title_justify="left")
            for col in ("image", "region", "state", "shapes", "build", "created"):
                table.add_column(col)
            for img in entry["candidates"][:limit]:
                table.add_row(
                    *cells(
                        img["cloud_image_id"],
                        img["region"],
                        _state(img),
                        _shapes_cell(img, required),
                        img["build_id"] or "-",
                        _short(img["created_at"]),
                    )
                )
            out.print(table)
            _more(out, len(entry["candidates"]) - limit, "candidates")
        if entry["blocked"]:
            table = Table(title="blocked", title_justify="left")
            for col in ("image", "region", "shapes", "since", "reason"):
                table.add_column(col)
            for img in entry["blocked"][:limit]:
                table.add_row(
                    *cells(
                        img["cloud_image_id"],
                        img["region"],
                        _shapes_cell(img, required),
                        _short(img["state_changed_at"]),
                        img["reason"] or "-",
                    ),
                    style="red",
                )
            out.print(table)
            _more(out, len(entry["blocked"]) - limit, "blocked images")
        for img in entry.get("partial", []):
            word = str(img["state"]).replace("_", " ")
            reached = ", ".join(img["regions_reached"]) or "no region"
            missing = ", ".join(img["regions_missing"]) or "none"
            out.print(
                f"  [yellow]{markup(word)}[/] "
                + markup(
                    f"{img['cloud_image_id']} (promotion {img['promotion']}): reached "
                    f"{reached}; not reached {missing}; pointers unchanged. "
                    f"Resume: {img['resume']}"
                ),
                soft_wrap=True,
            )
            for region, error in img["errors"].items():
                out.print("    " + markup(f"{region}: {error}"), soft_wrap=True)
        if entry["events"]:
            table = Table(title="latest events", title_justify="left")
            for col in ("time", "actor", "kind", "message"):
                table.add_column(col)
            for ev in entry["events"]:
                table.add_row(
                    *cells(_short(ev["at"]), ev["actor"], ev["kind"], one_line(ev["message"]))
                )
            out.print(table)


@click.command("status")
@stack_option("Only this stack.")
@cloud_option("Only this cloud.")
@click.option(
    "--events",
    "n_events",
    type=click.IntRange(0, 10_000),
    default=5,
    show_default=True,
    help="How many latest events to show per stack and cloud.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Most candidates and blocked images listed per stack and cloud, newest first "
    "(default: 10 in the tables, all with --json).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stack: str | None,
    cloud: str | None,
    n_events: int,
    limit: int | None,
    as_json: bool,
) -> None:
    """Show current, candidate and blocked images per stack and cloud, and recent events."""
    from imagectl.catalog.db import open_catalog

    if stack is not None:
        _known_stack(ctx, stack)
    from imagectl.promotion.query import catalog_status

    catalog = open_catalog()
    try:
        stacks = catalog_status(catalog, stack=stack, cloud=cloud, events=n_events)
        from imagectl.rollout.query import rollout_status

        for entry in stacks:  # the canary pointer and the latest rollout decisions
            entry.update(rollout_status(catalog, entry["stack"], entry["cloud"]))
    finally:
        catalog.close()
    not_run: list[str] = []
    for entry in stacks:
        required = _validation_shapes(ctx, entry["stack"], entry["cloud"], not_run)
        entry["validation_shapes"] = required
        for img in [
            *(row["image"] for row in entry["current"]),
            *(row["previous"] for row in entry["current"] if row["previous"]),
            *entry["candidates"],
            *entry["blocked"],
            *entry["partial"],
        ]:
            _annotate(img, required)
    headline = could_not_run(len(stacks), not_run)
    if as_json:
        for entry in stacks:
            entry["hidden"] = {k: _keep(entry, k, limit) for k in ("candidates", "blocked")}
        emit_json(
            {"database": catalog.url, "complete": not not_run, "headline": headline,
             "limit": limit, "stacks": stacks}
        )  # fmt: skip
        return
    if headline:  # first, before any table that reads as all-clear
        from imagectl.core.safetext import markup

        console().print(f"[yellow]{markup(headline)}[/]", soft_wrap=True)
    if not stacks:
        from imagectl.core.safetext import cell

        scope = " ".join(f for f in (f"for stack {stack}" if stack else "",
                                     f"on cloud {cloud}" if cloud else "") if f)  # fmt: skip
        console().print(
            cell(f"no images yet{' ' + scope if scope else ''} (catalog: {catalog.url})")
        )
        return
    _render(stacks, catalog.url, TABLE_LIMIT if limit is None else limit)


TABLE_LIMIT = 10  # candidates and blocked images per table without --limit


def _keep(entry: dict[str, list[object]], key: str, limit: int | None) -> int:
    """Keep the newest ``limit`` of ``entry[key]`` (all when None); how many were hidden."""
    rows = entry[key]
    if limit is None or len(rows) <= limit:
        return 0
    entry[key] = rows[:limit]
    return len(rows) - limit


def _known_stack(ctx: click.Context, stack: str) -> None:
    """``--stack`` names a stack file of the workspace (exit 2 otherwise, with the list)."""
    from imagectl.stacks.loader import find_stack

    find_stack(workspace(ctx).stacks_dir, stack)
