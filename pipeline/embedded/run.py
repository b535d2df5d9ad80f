"""``imagectl run``: pins -> build -> boot -> validate -> decide -> promote, on one machine.

Steps (each timed and shown live by ``progress``):

1. base       the Debian base image (debootstrap, cached by its inputs: ``base``)
2. accel      KVM if it really runs a guest, else TCG (``accel``)
3. provision  playbooks/site.yml with the stack's pins natively in a chroot of the
              base's root, all but the ``booted`` roles; the root becomes a disk
              (``provision``)
   build      Packer's qemu builder boots that disk and runs site.yml's ``booted``
              roles (manifest, hygiene) over SSH (``candidate``); recorded as a build
              in the catalog
4. import     the candidate's disk into the local registry's first region (content id);
              recorded as an image, state ``built``
   fault      (``--inject-fault``) a faulty copy of the candidate replaces it
5. boot       the candidate in QEMU on a throw-away overlay, SSH with a per-run key
6. validate   the image's validator over SSH; the receipt is recorded in the catalog
7. decide     pass -> ``validated``; ``attest`` signs the verdict with the state folder's
              key (``imagectl.provenance``) and verifies it; then promote through
              ``imagectl.promotion.promote``
              (parallel replication to every region, "latest" pointers); fail -> blocked
              with the failing checks named, no promotion.

Every process started (qemu, packer, ssh) belongs to one ``Children`` owner and is
stopped on exit, failure and Ctrl-C.
"""

from __future__ import annotations

import json
import shutil
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Build
from imagectl.clouds.base import CloudImage
from imagectl.clouds.local.provider import LocalProvider
from imagectl.embedded import disk, faults
from imagectl.embedded.accel import AccelChoice, choose_accel
from imagectl.embedded.base import BaseSpec, ensure_base
from imagectl.embedded.candidate import (
    Candidate,
    build_candidate,
    find_cached,
    inputs_key,
)
from imagectl.embedded.procs import Children, Terminated
from imagectl.embedded.progress import Progress
from imagectl.embedded.qemu import VmSpec, boot
from imagectl.embedded.ssh import generate_key
from imagectl.embedded.validation import ValidationOutcome, validate_in_vm
from imagectl.errors import EXIT_FAILED, EXIT_OK, UserError
from imagectl.packer.build import git_commit, new_build_id
from imagectl.paths import Workspace, state_dir
from imagectl.promotion import block_image, promote
from imagectl.promotion.context import provider_for
from imagectl.provenance.attest import attest_image
from imagectl.provenance.keys import load_trust
from imagectl.provenance.record import record_build_sbom
from imagectl.provenance.verify import verify_image
from imagectl.stacks import load_resolved
from imagectl.stacks.resolve import ResolvedStack
from imagectl.tags import TAG_BUILD

CLOUD = "local"


@dataclass
class RunOptions:
    stack: str = "local"
    regions: int | None = None
    inject_fault: str | None = None
    accel: str = "auto"
    rebuild: bool = False  # build even when a candidate of identical inputs is cached
    rebuild_base: bool = False
    boot_timeout_s: float = 600.0
    build_timeout_s: float = 3600.0


@dataclass
class RunResult:
    stack: str
    outcome: str  # promoted | blocked | failed
    run_id: str
    run_dir: str
    image_id: str | None = None
    image_file: str | None = None
    build_id: str | None = None
    candidate_reused: bool = False
    base: dict[str, Any] = field(default_factory=dict)
    accel: dict[str, Any] = field(default_factory=dict)
    fault: dict[str, str] | None = None
    verdict: str | None = None
    worst_action: str | None = None
    failing_checks: list[dict[str, str]] = field(default_factory=list)
    receipt: str | None = None
    attestation: str | None = None  # sha256-<hex> of the signed DSSE envelope
    sbom: str | None = None  # the candidate's CycloneDX SBOM (sbom.cdx.json)
    regions: list[str] = field(default_factory=list)
    regions_reached: list[str] = field(default_factory=list)
    promotion_state: str | None = None
    blocked_reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.outcome == "promoted" else EXIT_FAILED

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}


def choose_regions(resolved: ResolvedStack, count: int | None) -> list[str]:
    local = resolved.stack.clouds.local
    assert local is not None
    regions = list(local.regions)
    if count is None:
        return regions
    if count < 1 or count > len(regions):
        raise UserError(
            f"--regions {count}: stack '{resolved.name}' has {len(regions)} local regions "
            f"({', '.join(regions)})",
            hint=f"Use a number from 1 to {len(regions)}, or add regions to clouds.local",
        )
    return regions[:count]


def new_run_id() -> str:
    return new_build_id()


def run_local(ws: Workspace, opts: RunOptions, progress: Progress) -> RunResult:
    _, resolved = load_resolved(ws.images, opts.stack)
    spec = BaseSpec.from_stack(resolved)  # UserError without clouds.local / not Debian
    regions = choose_regions(resolved, opts.regions)
    if opts.inject_fault and opts.inject_fault not in faults.FAULTS:
        raise UserError(
            f"unknown fault '{opts.inject_fault}'", hint=f"Use one of: {', '.join(faults.FAULTS)}"
        )
    run_id = new_run_id()
    run_dir = state_dir() / "local" / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(
        stack=resolved.name, outcome="failed", run_id=run_id, run_dir=str(run_dir), regions=regions
    )
    try:
        with Children() as children:
            _pipeline(ws, opts, progress, children, resolved, spec, regions, run_dir, result)
    except Exception as exc:  # a step failed: the run ends "failed" (exit 1), named
        signum = getattr(exc, "signum", None)
        if type(exc).__name__ == "PackerCancelled" and signum:
            # packer was stopped by our Ctrl-C / SIGTERM: the run is cancelled, not failed
            if signum == signal.SIGINT:
                raise KeyboardInterrupt from exc
            raise Terminated(signum) from exc
        failed = [s for s in progress.steps if s.outcome == "failed"]
        where = failed[-1].title if failed else "setup"
        text = exc.render() if isinstance(exc, UserError) else str(exc)
        result.outcome = "failed"
        result.error = f"{where}: {text}"
    finally:
        result.timings = progress.timings()
        (run_dir / "result.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def _pipeline(
    ws: Workspace,
    opts: RunOptions,
    progress: Progress,
    children: Children,
    resolved: ResolvedStack,
    spec: BaseSpec,
    regions: list[str],
    run_dir: Path,
    result: RunResult,
) -> None:
    local = resolved.stack.clouds.local
    assert local is not None
    catalog = open_catalog()
    provider = _provider(resolved)

    # 1. base image -------------------------------------------------------------------
    with progress.step("base", "Base image: Debian debootstrap") as st:
        base = ensure_base(spec, children, st.note, rebuild=opts.rebuild_base)
        st.note(("reused cached" if base.cached else "built") + f" {base.folder}")
    result.base = {"key": base.folder.name, "folder": str(base.folder), "cached": base.cached}

    # 2. accelerator --------------------------------------------------------------------
    with progress.step("accel", "Accelerator: KVM probe") as st:
        accel: AccelChoice = choose_accel(opts.accel, base.kernel, children)
        st.note(f"{accel.name}: {accel.reason}")
    result.accel = asdict(accel)

    # 3. build ----------------------------------------------------------------------------
    cached: Candidate | None = None
    if not opts.rebuild:
        cached = find_cached(inputs_key(ws, resolved, base))
    if cached is not None:
        candidate = cached
        progress.skip(
            "build",
            "Build: packer qemu + playbooks/site.yml",
            f"candidate of build {cached.build_id} has the same inputs (pins, base, template, "
            "playbooks, sources); --rebuild builds anyway",
        )
        with catalog.transaction() as s:
            build_pk = _build_pk(s, cached.build_id)
        if build_pk is None:
            with catalog.transaction() as s:
                build = repo.record_build(
                    s, build_id=cached.build_id, stack=resolved.name,
                    stack_digest=resolved.digest, cloud=CLOUD,
                )  # fmt: skip
                repo.finish_build(s, build, outcome="succeeded", packer_manifest=cached.manifest)
                build_pk = build.id
    else:
        build_id = result.run_id
        with catalog.transaction() as s:
            build_row = repo.record_build(
                s, build_id=build_id, stack=resolved.name, stack_digest=resolved.digest,
                cloud=CLOUD, git_commit=git_commit(ws.root),
            )  # fmt: skip
            build_pk = build_row.id
        try:
            candidate = build_candidate(
                ws, resolved, base, accel=accel.name, build_id=build_id, progress=progress,
                children=children, timeout=opts.build_timeout_s,
            )  # fmt: skip
        except BaseException as exc:
            with catalog.transaction() as s:
                repo.finish_build(s, build_pk, outcome=_build_outcome(exc))
            raise
    result.build_id = candidate.build_id
    result.candidate_reused = candidate.reused
    folder = candidate.build_folder or Path(str(candidate.manifest.get("build_folder") or ""))
    if folder.name and build_pk is not None:
        sbom = record_build_sbom(catalog, build_pk, candidate.build_id, folder, resolved, CLOUD)
        result.sbom = str(sbom) if sbom else None

    # fault (optional): a faulty copy of the candidate --------------------------------
    image_file = candidate.path
    if opts.inject_fault:
        with progress.step("fault", f"Inject fault: {opts.inject_fault}") as st:
            image_file = run_dir / "faulty-candidate.qcow2"
            fault = faults.inject(
                children, opts.inject_fault, candidate.path, image_file,
                pinned_packages=list(local.packages),
            )  # fmt: skip
            st.note(fault.detail)
        result.fault = fault.to_dict()

    # 4. import into the registry's source region, record in the catalog --------------------
    source_region = regions[0]
    with progress.step("import", f"Register candidate in {source_region}") as st:
        image_id = disk.content_id(image_file)
        cloud_image = provider.import_image(
            image_file, region=source_region, stack=resolved.name, digest=resolved.digest,
            name=f"imagectl-{resolved.name}-{candidate.build_id}",
            tags={TAG_BUILD: candidate.build_id},
        )  # fmt: skip
        image_id = cloud_image.image_id
        with catalog.transaction() as s:
            if not candidate.reused and build_pk is not None:
                repo.finish_build(
                    s, build_pk, outcome="succeeded",
                    artifact_id=image_id, packer_manifest=candidate.manifest,
                )  # fmt: skip
            row = repo.find_image(s, CLOUD, source_region, image_id)
            if row is None:
                row = repo.record_image(
                    s, build=_get_build(s, build_pk), cloud_image_id=image_id,
                    region=source_region, tags={"file": str(image_file)},
                )  # fmt: skip
            image_pk = row.id
            state = row.state
        st.note(f"{image_id[:19]}… ({state})")
    result.image_id = image_id
    result.image_file = str(image_file)
    if state in (ImageState.DEPRECATED, ImageState.DELETED, ImageState.ROLLED_BACK):
        raise UserError(
            f"image {image_id} is '{state}' in the catalog and cannot be promoted again",
            hint="Run with --rebuild to build a new candidate",
        )

    # 5-6. boot and validate ----------------------------------------------------------------
    # A reused candidate may already be further along: it is validated again (a fresh
    # receipt), but its state only moves where the lifecycle allows.
    if state in (ImageState.BUILT, ImageState.INCONCLUSIVE):
        with catalog.transaction() as s:
            repo.set_state(
                s, image_pk, ImageState.VALIDATING, reason="local run: validation boot started"
            )
            state = ImageState.VALIDATING
    outcome = _boot_and_validate(
        children, progress, base, accel, local, image_file, image_id, resolved, run_dir, opts,
        provider, cloud_image,
    )  # fmt: skip
    result.verdict = outcome.verdict
    result.worst_action = outcome.worst_action
    result.failing_checks = outcome.failing
    result.receipt = str(outcome.receipt_path)
    with catalog.transaction() as s:
        repo.record_receipt(
            s, image_pk, shape=local.validation_shapes[0] if local.validation_shapes else "qemu",
            host=f"qemu-{accel.name}-{result.run_id}", receipt=outcome.receipt,
        )  # fmt: skip

    # 7. decide and promote -----------------------------------------------------------------
    if not outcome.passed or state == ImageState.BLOCKED:
        names = ", ".join(f["name"] for f in outcome.failing) or "verdict fail"
        reason = f"validation failed: {names}" if not outcome.passed else "blocked earlier"
        with progress.step("decide", "Decide: blocked, not promoted") as st:
            if state != ImageState.BLOCKED:
                block_image(catalog, image_pk, reason=reason)
            else:
                with catalog.transaction() as s:
                    reason = repo.image_row(s, image_pk).blocked_reason or reason
            st.note(reason)
        result.outcome = "blocked"
        result.blocked_reason = reason
        return
    if state == ImageState.VALIDATING:
        with catalog.transaction() as s:
            repo.set_state(s, image_pk, ImageState.VALIDATED, reason="local run: receipt passed")
    with progress.step("attest", "Attest: sign the verdict, verify it") as st:
        attested = attest_image(catalog, image_pk, provider)
        with catalog.transaction() as s:
            check = verify_image(s, repo.image_row(s, image_pk), load_trust())
        if not check.valid:
            raise UserError(f"the attestation just signed does not verify: {check.reasons[0]}")
        result.attestation = attested.digest
        st.note(f"{attested.digest[:19]} by key {attested.keyid[:12]} ({attested.path})")
    with progress.step("promote", f"Promote to {len(regions)} regions (parallel)") as st:

        def on_region(region: str, step: str, detail: str = "") -> None:
            st.note(f"{region}: {step} {detail}".strip())

        promo = promote(catalog, provider, resolved, image_pk, regions=regions, progress=on_region)
        result.promotion_state = promo.state
        result.regions_reached = sorted(r for r, rr in promo.regions.items() if rr.state == "done")
        if promo.state == "already_promoted":  # nothing copied: the pointers already name it
            result.regions_reached = [
                r for r in regions if provider.get_pointer(resolved.name, r) == image_id
            ]
        st.note(f"{promo.state}: {', '.join(result.regions_reached) or 'no region'}")
    result.outcome = "promoted" if promo.state in ("promoted", "already_promoted") else "failed"
    if result.outcome != "promoted":
        result.error = f"promotion ended {promo.state}"


def _boot_and_validate(
    children: Children,
    progress: Progress,
    base: Any,
    accel: AccelChoice,
    local: Any,
    image_file: Path,
    image_id: str,
    resolved: ResolvedStack,
    run_dir: Path,
    opts: RunOptions,
    provider: LocalProvider,
    cloud_image: CloudImage,
) -> ValidationOutcome:
    key = generate_key(run_dir / "ssh", comment=f"imagectl-validate-{run_dir.name}")
    overlay = disk.overlay(children, image_file, run_dir / "validate-overlay.qcow2")
    spec = VmSpec(
        disk=overlay, kernel=base.kernel, initrd=base.initrd, accel=accel.name,
        memory_mib=local.build.memory_mib, cpus=local.build.cpus,
        serial_log=run_dir / "validate.serial.log", name=f"imagectl-validate-{run_dir.name}",
    )  # fmt: skip
    instance = None
    try:
        with progress.step("boot", f"Boot candidate in QEMU ({accel.name}), wait for SSH") as st:
            st.note(f"serial console: {spec.serial_log}")
            vm = boot(children, spec, key, ssh_timeout=opts.boot_timeout_s)
            st.note(f"SSH on 127.0.0.1:{spec.ssh_port} (qemu pid {vm.pid})")
            if hasattr(provider, "register_instance"):
                instance = provider.register_instance(
                    cloud_image, shape=f"qemu-{accel.name}", address=f"127.0.0.1:{spec.ssh_port}"
                )
        try:
            with progress.step("validate", "Validate inside the VM over SSH") as st:
                st.note(f"imagectl validate --profile {resolved.stack.validation.profile}")
                outcome = validate_in_vm(
                    vm, image_id=image_id, profile=resolved.stack.validation.profile,
                    dest=run_dir / "receipt.json",
                    shape=local.validation_shapes[0] if local.validation_shapes else None,
                )  # fmt: skip
                st.note(f"verdict {outcome.verdict}, worst action {outcome.worst_action}")
        finally:
            with progress.step("poweroff", "Power off the VM") as st:
                vm.poweroff()
                st.note("clean shutdown over SSH")
    finally:
        try:
            if instance is not None:
                provider.terminate(instance)
        finally:
            overlay.unlink(missing_ok=True)
            shutil.rmtree(key.parent, ignore_errors=True)  # this run's SSH key
    return outcome


def _provider(resolved: ResolvedStack) -> LocalProvider:
    provider = provider_for(resolved, CLOUD)
    assert isinstance(provider, LocalProvider)  # CLOUD is the local cloud
    return provider


def _build_pk(session: Session, build_id: str) -> int | None:
    row = session.scalar(select(Build).where(Build.build_id == build_id))
    return row.id if row is not None else None


def _get_build(session: Session, pk: int | None) -> Build | None:
    return session.get(Build, pk) if pk is not None else None


def _build_outcome(exc: BaseException) -> str:
    cancelled = isinstance(exc, (KeyboardInterrupt, Terminated)) or type(exc).__name__ == (
        "PackerCancelled"
    )
    return "cancelled" if cancelled else "failed"
