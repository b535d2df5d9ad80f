"""The build stage: resolve the stack, check the overrides, prepare the cloud, record the
build, run Packer through imagectl's wrapper, record the artifacts as ``built`` images.

``build_image`` is what ``imagectl build`` runs; ``dry_run`` is its ``--dry-run`` (the
exact command and variables, nothing started). A failure or Ctrl-C during Packer is
recorded as a failed or cancelled build before it propagates.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.building import records as build_records
from imagectl.errors import UserError
from imagectl.lint import declared_packer_vars
from imagectl.packer.binary import PackerBinary, find_packer
from imagectl.packer.build import (
    BuildPlan,
    BuildResult,
    check_build_id,
    git_commit,
    new_build_id,
    plan_build,
    run_build,
)
from imagectl.packer.machine_readable import PackerEvent
from imagectl.paths import Workspace
from imagectl.provenance.record import record_build_sbom
from imagectl.stacks import load_resolved


@dataclass(frozen=True)
class BuildRequest:
    """What ``imagectl build`` asks for (its options, parsed)."""

    stack: str
    cloud: str
    var_dir: Path | None = None
    build_id: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    skip_provisioning: bool = False
    timeout_s: float = 240 * 60.0


@dataclass(frozen=True)
class BuildOutcome:
    result: BuildResult
    images: list[dict[str, str]]
    sbom: str | None = None  # the image's CycloneDX SBOM beside the build record

    def to_dict(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "images": self.images, "sbom": self.sbom}


@dataclass(frozen=True)
class DryRun:
    plan: BuildPlan
    note: str  # why the command is shown for another Packer, or ""


def parse_overrides(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--var NAME=VALUE`` items as a dict; a malformed item is bad input."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(
                f"--var '{item}' is not NAME=VALUE", hint="e.g. --var aws_region=us-west-2"
            )
        out[name] = value
    return out


def check_override_names(extra: dict[str, str], folder: Path, cloud: str) -> None:
    """Every ``--var NAME=...`` names a variable the cloud's templates declare."""
    declared = declared_packer_vars(folder)
    for name in extra:
        if declared and name not in declared:
            near = difflib.get_close_matches(name, sorted(declared), n=1)
            raise UserError(
                f"--var {name[:80]!r}: no such variable in the {cloud} templates ({folder})",
                hint=f"Did you mean '{near[0]}'?" if near else "See variables.pkr.hcl there",
            )


def dry_run(ws: Workspace, request: BuildRequest) -> DryRun:
    """The build's exact Packer command and variables, without running anything."""
    _, resolved = load_resolved(ws.images, request.stack)
    check_override_names(request.overrides, ws.packer_dir(request.cloud), request.cloud)
    note = ""
    try:
        binary: PackerBinary | None = find_packer()
    except UserError as exc:
        binary = None
        note = f"packer not usable here ({exc.message}); command shown for Packer >= 1.7"
    plan = plan_build(
        resolved,
        request.cloud,
        workspace=ws,
        build_id=request.build_id,
        var_dir=request.var_dir,
        binary=binary,
        overrides=request.overrides,
        skip_provisioning=request.skip_provisioning,
        validator_wheel="<built at run time: pip wheel --no-deps>",
    )
    return DryRun(plan=plan, note=note)


def build_image(
    ws: Workspace, request: BuildRequest, on_event: Callable[[PackerEvent], None] | None = None
) -> BuildOutcome:
    """Build one candidate; the catalog records the build and each artifact as ``built``."""
    _, resolved = load_resolved(ws.images, request.stack)
    cloud = request.cloud
    check_override_names(request.overrides, ws.packer_dir(cloud), cloud)
    extra = build_records.endpoint_overrides(cloud, request.overrides)
    build_records.prepare(resolved, cloud)
    build_id = check_build_id(request.build_id) if request.build_id else new_build_id()
    record = build_records.start(resolved, cloud, build_id, git_commit(ws.root))
    try:
        result = run_build(
            resolved,
            cloud,
            workspace=ws,
            build_id=build_id,
            var_dir=request.var_dir,
            overrides=extra,
            skip_provisioning=request.skip_provisioning,
            on_event=on_event,
            timeout=request.timeout_s,
        )
    except (Exception, KeyboardInterrupt) as exc:
        build_records.failed(record, cancelled=isinstance(exc, KeyboardInterrupt))
        raise
    images = build_records.finish(record, resolved, cloud, result.artifacts)
    catalog, build = record.catalog, record.build
    sbom = record_build_sbom(catalog, build.id, build_id, result.plan.folder, resolved, cloud)
    return BuildOutcome(result=result, images=images, sbom=str(sbom) if sbom else None)
