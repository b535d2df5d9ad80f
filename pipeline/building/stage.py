"""The build stage: resolve the stack, check the overrides, prepare the cloud, record the
build, run Packer through imagectl's wrapper, record the artifacts as ``built`` images.

``build_image`` is what ``imagectl build`` (and ``imagectl run``) runs; ``dry_run`` is its
``--dry-run`` (the exact command and variables, nothing started). A failure or Ctrl-C
during Packer is recorded as a failed or cancelled build before it propagates.

The local cloud builds its own base disk first (``imagectl.building.local``: debootstrap,
chroot provisioning, then the same Packer wrapper), may reuse a candidate of identical
inputs (``reuse``) and may alter a copy to demonstrate a block (``inject_fault``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from imagectl.building import local as local_build
from imagectl.building import records as build_records
from imagectl.building.base_image import (
    local_base_image,
    pinned_base_image,
    resolve_base_image,
)
from imagectl.building.local import LocalBuildDetails
from imagectl.building.records import BuiltImage
from imagectl.building.stand_in import mark_stand_in, write_stand_in
from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.spec import CloudSpec
from imagectl.core.errors import UserError
from imagectl.embedded.procs import Children
from imagectl.embedded.progress import Progress
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
from imagectl.packer.manifest import Artifact
from imagectl.packer.runner import PackerCancelled
from imagectl.paths import Workspace
from imagectl.provenance.record import (
    prepare_build_sbom,
    record_manifest_digest,
    store_build_sbom,
)
from imagectl.stacks import load_resolved
from imagectl.stacks.expectations import BuildExpectations, for_build
from imagectl.stacks.resolve import ResolvedStack
from imagectl.stacks.schema import CloudCommon
from imagectl.supply.lock import validator_lock_path


@dataclass(frozen=True)
class BuildRequest:
    """What ``imagectl build`` asks for (its options, parsed)."""

    stack: str
    spec: CloudSpec[CloudCommon]  # the cloud (its name resolved once, by the command)
    var_dir: Path | None = None
    build_id: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    skip_provisioning: bool = False
    timeout_s: float = 240 * 60.0
    # the local cloud (CloudSpec.builds_base_disk) only:
    reuse: bool = False  # a candidate of identical inputs is imported, not built again
    inject_fault: str | None = None  # a copy altered so that validation must block it
    accel: str = "auto"  # QEMU accelerator: auto | kvm | tcg
    rebuild_base: bool = False


@dataclass(frozen=True)
class BuildOutcome:
    build_id: str
    stack: str
    cloud: str
    folder: Path | None
    manifest_file: Path | None
    duration_s: float
    artifacts: list[Artifact]
    images: list[BuiltImage]
    sbom: str | None = None  # the image's CycloneDX SBOM beside the build record
    reused: bool = False
    fault: dict[str, str] | None = None
    local: LocalBuildDetails | None = None  # the local cloud's base, accelerator and disk

    def to_dict(self) -> dict[str, object]:
        """``imagectl build --json``."""
        return {
            "build_id": self.build_id,
            "stack": self.stack,
            "cloud": self.cloud,
            "folder": str(self.folder) if self.folder else None,
            "manifest": str(self.manifest_file) if self.manifest_file else None,
            "duration_s": round(self.duration_s, 1),
            "artifacts": [a.to_dict() for a in self.artifacts],
            "images": [i.to_dict() for i in self.images],
            "sbom": self.sbom,
            "reused": self.reused,
            "fault": self.fault,
            **(self.local.to_dict() if self.local else {}),
        }


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
    check_override_names(request.overrides, request.spec.packer_dir(ws.images), request.spec.name)
    base = pinned_base_image(resolved, request.spec)
    note = ""
    try:
        binary: PackerBinary | None = find_packer()
    except UserError as exc:
        binary = None
        note = f"packer not usable here ({exc.message}); command shown for Packer >= 1.7"
    plan = plan_build(
        resolved,
        request.spec,
        workspace=ws,
        build_id=request.build_id,
        var_dir=request.var_dir,
        binary=binary,
        overrides=request.overrides,
        skip_provisioning=request.skip_provisioning,
        validator_wheel="<built at run time: pip wheel --no-deps>",
        base_image=base,
    )
    if base is None and not request.spec.builds_base_disk:
        note = "; ".join(
            n for n in (note, "the base image id is resolved when the build runs (the "
                        "stack pins none; `imagectl plan` shows what it resolves to now)") if n
        )  # fmt: skip
    return DryRun(plan=plan, note=note)


def build_image(
    ws: Workspace,
    request: BuildRequest,
    on_event: Callable[[PackerEvent], None] | None = None,
    progress: Progress | None = None,
) -> BuildOutcome:
    """Build one candidate; the catalog records the build and each artifact as ``built``."""
    _, resolved = load_resolved(ws.images, request.stack)
    spec = request.spec
    cloud = spec.name
    if (request.reuse or request.inject_fault) and not spec.builds_base_disk:
        raise UserError(
            f"--reuse and --inject-fault are options of the local cloud's build, not {cloud}'s",
            hint="Build a cloud candidate without them",
        )
    local_build.check_fault(request.inject_fault)
    check_override_names(request.overrides, spec.packer_dir(ws.images), cloud)
    extra = build_records.endpoint_overrides(spec, request.overrides)
    build_records.prepare(resolved, spec)
    build_id = check_build_id(request.build_id) if request.build_id else new_build_id()
    if spec.builds_base_disk:
        with Children() as children:
            return _build_local(ws, request, resolved, build_id, children, progress)
    # the base image by id, once: Packer gets the id, and the record names it
    base = resolve_base_image(resolved, spec)
    record = build_records.start(
        resolved,
        spec,
        build_id,
        git_commit(ws.root),
        _expectations(ws, resolved, spec, build_id),
        base,
    )
    try:
        result = run_build(
            resolved,
            spec,
            workspace=ws,
            build_id=build_id,
            var_dir=request.var_dir,
            overrides=extra,
            skip_provisioning=request.skip_provisioning,
            on_event=on_event,
            timeout=request.timeout_s,
            base_image=base,
        )
    except BaseException as exc:
        build_records.failed(record, cancelled=_cancelled(exc))
        raise
    # nothing provisioned (an emulated cloud): the SBOM is the pins', marked as a stand-in
    stand_in = request.skip_provisioning and result.plan.folder is not None
    if stand_in:
        write_stand_in(result.plan.folder, resolved, cloud, validator_lock_path(ws))
    return _finish(
        record, resolved, spec, result.artifacts, result.plan.folder, result, stand_in=stand_in
    )


def _expectations(
    ws: Workspace, resolved: ResolvedStack, spec: CloudSpec[CloudCommon], build_id: str
) -> BuildExpectations:
    """The image's expectations on each validation shape of its cloud, resolved once, by
    its build (the catalog's record of them is what validate-image judges it by)."""
    shapes = spec.settings(resolved.stack).validation_shapes
    return for_build(ws.images, resolved, shapes, build_id=build_id)


def _cancelled(exc: BaseException) -> bool:
    """Ctrl-C, SIGTERM (``Terminated``) or Packer stopped by either: cancelled, not failed."""
    return not isinstance(exc, Exception) or isinstance(exc, PackerCancelled)


def _finish(
    record: build_records.BuildRecord,
    resolved: ResolvedStack,
    spec: CloudSpec[CloudCommon],
    artifacts: list[Artifact],
    folder: Path | None,
    result: BuildResult | None,
    *,
    stand_in: bool = False,
    reused: bool = False,
    fault: dict[str, str] | None = None,
    local: LocalBuildDetails | None = None,
) -> BuildOutcome:
    prepared = None
    if folder is not None:  # what the image reported, refused (exit 2) before any record
        try:
            base = record.build.base_image
            prepared = prepare_build_sbom(
                record.build.build_id, folder, resolved, spec.name,
                BaseImage.from_dict(dict(base)) if base else None,
            )  # fmt: skip
            if prepared is not None and stand_in:
                prepared = dataclasses.replace(prepared, text=mark_stand_in(prepared.text))
        except UserError:
            if record.build.outcome != "succeeded":  # not a reused candidate's build
                build_records.failed(record, cancelled=False)
            raise
    images = build_records.finish(record, resolved, spec, artifacts)
    catalog, build = record.catalog, record.build
    sbom = None
    if folder is not None:
        record_manifest_digest(catalog, build.id, folder)
        sbom = store_build_sbom(catalog, build.id, prepared) if prepared else None
    return BuildOutcome(
        build_id=build.build_id,
        stack=resolved.name,
        cloud=spec.name,
        folder=folder,
        manifest_file=result.plan.manifest_file if result else None,
        duration_s=result.run.duration_s if result else 0.0,
        artifacts=artifacts,
        images=images,
        sbom=str(sbom) if sbom else None,
        reused=reused,
        fault=fault,
        local=local,
    )


def _build_local(
    ws: Workspace,
    request: BuildRequest,
    resolved: ResolvedStack,
    build_id: str,
    children: Children,
    progress: Progress | None,
) -> BuildOutcome:
    """The local cloud: base disk and accelerator, the candidate built (or reused), then
    imported into the registry's build region and recorded like any cloud's artifact."""
    spec = request.spec
    region = spec.build_region(spec.settings(resolved.stack))
    shown = progress or local_build.quiet_progress()
    prep = local_build.prepare(
        ws, resolved, children, shown, accel=request.accel, rebuild_base=request.rebuild_base
    )
    if request.reuse and prep.cached is not None:
        candidate = prep.cached
        shown.skip(
            "build",
            "Build: packer qemu + playbooks/site.yml",
            f"candidate of build {candidate.build_id} has the same inputs (pins, base, "
            "template, playbooks, sources); --rebuild builds anyway",
        )
        record = build_records.adopt(
            resolved, spec, candidate.build_id,
            _expectations(ws, resolved, spec, candidate.build_id),
        )  # fmt: skip
    else:
        record = build_records.start(
            resolved, spec, build_id, git_commit(ws.root),
            _expectations(ws, resolved, spec, build_id), local_base_image(resolved),
        )  # fmt: skip
        try:
            candidate = local_build.build(
                ws, resolved, prep, build_id=build_id, timeout_s=request.timeout_s,
                var_dir=request.var_dir,
            )  # fmt: skip
        except BaseException as exc:
            build_records.failed(record, cancelled=_cancelled(exc))
            raise
    published = local_build.publish(
        resolved, prep, candidate, region=region, inject_fault=request.inject_fault
    )
    folder = candidate.build_folder or Path(str(candidate.manifest.get("build_folder") or ""))
    return _finish(
        record, resolved, spec, [published.artifact],
        folder if folder.name else None, None,
        reused=candidate.reused, fault=published.fault, local=published.details,
    )  # fmt: skip
