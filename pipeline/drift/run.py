"""Run the selected drift sources over the selected stacks and collect one report."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.clouds.local.stack import LocalCloud
from imagectl.compat.data import load_compat
from imagectl.drift import (
    base_images,
    debian,
    fleet,
    hosts,
    proposals,
    replicas,
    upstream,
    writeback,
)
from imagectl.drift.errors import recorded
from imagectl.drift.findings import DriftReport
from imagectl.paths import Workspace
from imagectl.stacks import find_stack, load_stack, resolve, stack_paths


@dataclass(frozen=True)
class DriftOptions:
    sources: tuple[str, ...]
    stacks: tuple[str, ...] = ()
    as_of: dt.date = field(default_factory=dt.date.today)
    nvidia_repo_url: str | None = None
    hosts_dir: Path | None = None
    manifests: tuple[Path, ...] = ()
    write: bool = False


def run(ws: Workspace, opts: DriftOptions) -> DriftReport:
    data = load_compat(ws.compat_dir)
    if opts.stacks:
        paths = [find_stack(ws.stacks_dir, s) for s in opts.stacks]
    else:
        paths = stack_paths(ws.stacks_dir)
    resolved_all = []
    for path in paths:
        loaded = load_stack(path)
        resolved_all.append((loaded, resolve(loaded.stack, data)))

    report = DriftReport(sources=opts.sources, as_of=opts.as_of.isoformat())
    for loaded, resolved in resolved_all:  # every stack listed, in order, whatever fails
        report.stack(resolved.name, ws.relative(loaded.path))
    # A source that cannot run for a stack (or a cloud) is an error of that stack and
    # source (imagectl.drift.errors): the other checks still run and report.
    for loaded, resolved in resolved_all:
        if "upstream" in opts.sources:
            with recorded(report, "upstream", [resolved.name]):
                _upstream(loaded.path, resolved, data, report.stack(resolved.name), opts)
    stacks = [r for _, r in resolved_all]
    if base_images.SOURCE in opts.sources:
        base_images.check(stacks, report)
    if "replicas" in opts.sources:
        replicas.check(stacks, report)
    if "fleet" in opts.sources:
        fleet.check(stacks, report)
    if "hosts" in opts.sources:  # its inputs are files the user named: bad input is exit 2
        hosts.check(stacks, report, opts.hosts_dir, opts.manifests)
    return report


def _upstream(path: Path, resolved, data, drift, opts: DriftOptions) -> None:  # type: ignore[no-untyped-def]
    if resolved.stack.nvidia is not None:
        upstream.check_stack(resolved, data, drift, as_of=opts.as_of, repo_url=opts.nvidia_repo_url)
    elif resolved.stack.clouds.section_of(LocalCloud) is not None:
        debian.check_stack(resolved.stack, drift)
    drift.proposals = proposals.check(resolved, data, drift.proposals, opts.as_of)
    if opts.write and drift.proposals:
        drift.written = bool(writeback.write_changes(path, drift.proposals))
