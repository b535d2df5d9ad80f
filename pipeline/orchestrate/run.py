"""``imagectl run``: pins -> build -> boot -> validate -> decide -> promote, on one machine.

A short orchestration of the stage functions every cloud uses, on the local cloud
(``imagectl.clouds.local``: a registry whose regions are folders, instances that are
QEMU VMs):

1. build      ``imagectl.building.stage.build_image`` (what ``imagectl build --cloud local``
              runs): the Debian base (debootstrap, cached), site.yml natively in a chroot,
              Packer's qemu builder for the ``booted`` roles, the candidate imported into
              the first region and recorded ``built``; a candidate of identical inputs is
              reused unless ``--rebuild``; ``--inject-fault`` alters a copy
2. validate   ``imagectl.validation.stage.validate_image`` (what ``imagectl validate-image
              --cloud local`` runs): launch boots the candidate in QEMU, the image's own
              validator runs over SSH through ``playbooks/validate.yml``, the receipt is
              bound, recorded and decided; a validated image's attestation is signed
3. attest     the signed attestation is verified with the trust this machine holds
4. promote    ``imagectl.promotion.promote`` (what ``imagectl promote`` runs): parallel
              replication to every region, then the "latest" pointers flip

An image the catalog already judged is not validated again: a blocked one stays blocked,
a validated or promoted one goes on to promotion (idempotent).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.building.stage import BuildRequest, build_image
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog, open_catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.local.spec import SPEC as LOCAL
from imagectl.clouds.local.stack import LocalCloud
from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import EXIT_FAILED, EXIT_OK, UserError
from imagectl.embedded.procs import Terminated
from imagectl.embedded.progress import Progress, Step
from imagectl.packer.build import new_build_id
from imagectl.paths import Workspace, state_dir
from imagectl.promotion import promote
from imagectl.promotion.context import provider_for
from imagectl.provenance.keys import (
    ENV_SIGNER,
    ENV_TRUST,
    ensure_local_key,
    load_signer,
    load_trust,
)
from imagectl.provenance.verify import verify_image
from imagectl.stacks import load_resolved
from imagectl.stacks.resolve import ResolvedStack
from imagectl.validation.progress import Reporter
from imagectl.validation.stage import ImageValidationRequest, validate_image
from imagectl.validators.receipt import Receipt, load_receipt

if TYPE_CHECKING:
    # the class's own module: securesystemslib.signer imports it without re-exporting
    from securesystemslib.signer._key import Key

CLOUD = LOCAL.name
JUDGED = (ImageState.VALIDATED, ImageState.PROMOTING, ImageState.PROMOTED,
          ImageState.PARTIALLY_PROMOTED)  # fmt: skip
RETIRED = (ImageState.DEPRECATED, ImageState.DELETED, ImageState.ROLLED_BACK)


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
    base: dict[str, object] = field(default_factory=dict)
    accel: dict[str, object] = field(default_factory=dict)
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
    validation: dict[str, object] | None = None  # what validate-image returned
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.outcome == "promoted" else EXIT_FAILED

    def to_dict(self) -> dict[str, object]:
        """``imagectl run --json`` and the run's result.json."""
        return {**asdict(self), "exit_code": self.exit_code}


def choose_regions(resolved: ResolvedStack, count: int | None) -> list[str]:
    local = resolved.stack.clouds.section_of(LocalCloud)
    if local is None:
        raise UserError(
            f"stack '{resolved.name}' has no clouds.local section",
            hint="The local run needs clouds.local (kernel, mirror, packages, regions)",
        )
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


def failing_checks(receipt: Receipt) -> list[dict[str, str]]:
    """Name, title, message and action of every check that failed or errored."""
    return [
        {"name": c.id, "title": c.title, "message": c.message, "action": c.action.value}
        for c in receipt.failed_checks
    ]


class StepReporter(Reporter):
    """The validation stage's events as notes of the run's live step."""

    def __init__(self, step: Step) -> None:
        super().__init__()
        self._step = step

    def step(self, message: str) -> None:
        super().step(message)
        self._step.note(message)

    def instance(self, slot: int, instance_id: str, location: str, state: str) -> None:
        super().instance(slot, instance_id, location, state)
        self._step.note(f"{instance_id} ({location}): {state}")

    def task(self, host: str, task: str, status: str) -> None:
        super().task(host, task, status)
        if status != "running":
            self._step.note(f"{host}: {task}: {status}")


def run_local(ws: Workspace, opts: RunOptions, progress: Progress) -> RunResult:
    _, resolved = load_resolved(ws.images, opts.stack)
    regions = choose_regions(resolved, opts.regions)
    run_id = new_build_id()
    run_dir = state_dir() / LOCAL.name / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(
        stack=resolved.name, outcome="failed", run_id=run_id, run_dir=str(run_dir), regions=regions
    )
    try:
        _pipeline(ws, opts, progress, resolved, regions, run_dir, result)
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
    resolved: ResolvedStack,
    regions: list[str],
    run_dir: Path,
    result: RunResult,
) -> None:
    catalog = open_catalog()
    trusted = run_trust()
    # 1. build (or reuse) the candidate, imported into the first region, recorded -------
    built = build_image(
        ws,
        BuildRequest(
            stack=resolved.name, spec=cloud_spec(CLOUD), reuse=not opts.rebuild,
            inject_fault=opts.inject_fault, accel=opts.accel, rebuild_base=opts.rebuild_base,
            timeout_s=opts.build_timeout_s,
        ),
        progress=progress,
    )  # fmt: skip
    (image,) = built.images
    image_id = image.image_id
    result.build_id = built.build_id
    result.candidate_reused = built.reused
    if built.local is not None:
        result.base = built.local.base()
        result.accel = built.local.accelerator()
        result.image_file = built.local.disk
    result.fault = built.fault
    result.sbom = built.sbom
    result.image_id = image_id
    state: str = image.state
    if state in RETIRED:
        raise UserError(
            f"image {image_id} is '{state}' in the catalog and cannot be promoted again",
            hint="Run with --rebuild to build a new candidate",
        )

    # 2. validate: launch (QEMU), reach, validator over SSH, decide, record, attest ------
    reasons: list[str] = []
    if state in JUDGED:
        progress.skip("validate", "Validate", f"{image_id[:19]}… is {state} in the catalog")
    elif state == ImageState.BLOCKED:
        progress.skip("validate", "Validate", f"{image_id[:19]}… was blocked earlier")
    else:
        receipts = run_dir / "receipts"
        with progress.step("validate", "Validate: boot the candidate in QEMU, the image's "
                           "validator over SSH (playbooks/validate.yml)") as st:  # fmt: skip
            outcome = validate_image(
                ws,
                ImageValidationRequest(
                    image_id=image_id, spec=cloud_spec(CLOUD), stack=resolved.name,
                    reach_timeout_s=opts.boot_timeout_s, receipts_dir=receipts,
                ),
                StepReporter(st),
            )  # fmt: skip
            st.note(f"{outcome.state}: {'; '.join(outcome.reasons)}")
        result.validation = outcome.to_dict()
        state, reasons = outcome.state, outcome.reasons
        found = sorted(receipts.glob("*.json")) if receipts.is_dir() else []
        if found:
            receipt = load_receipt(found[0])
            result.receipt = str(found[0])
            result.verdict = receipt.verdict
            result.worst_action = receipt.worst_action.value
            result.failing_checks = failing_checks(receipt)
        result.attestation = outcome.attestation

    if state == ImageState.BLOCKED:
        result.outcome = "blocked"
        result.blocked_reason = _blocked_reason(catalog, image_id, image.region)
        return
    if state not in JUDGED:
        raise UserError(f"validation ended {state}: {'; '.join(reasons) or state}")

    # 3. the attestation verifies with this machine's trust ------------------------------
    with progress.step("attest", "Attest: verify the signed verdict") as st:
        with catalog.transaction() as s:
            row = repo.find_image(s, CLOUD, image.region, image_id)
            assert row is not None  # the build stage recorded it
            image_pk = row.id
            check = verify_image(s, row, trusted)
        if not check.valid:
            raise UserError(f"the attestation does not verify: {check.reasons[0]}")
        result.attestation = result.attestation or check.digest
        st.note(f"{(check.digest or '')[:19]} verifies")

    # 4. promote -----------------------------------------------------------------------
    provider = provider_for(resolved, CLOUD)
    with progress.step("promote", f"Promote to {len(regions)} regions (parallel)") as st:

        def on_region(region: str, step: str, detail: str = "") -> None:
            st.note(f"{region}: {step} {detail}".strip())

        promo = promote(
            catalog, provider, resolved, image_pk, regions=regions, progress=on_region,
            trusted=trusted,
        )  # fmt: skip
        result.promotion_state = promo.state
        with catalog.transaction() as s:  # signed again by the promotion, naming the copies
            newest = repo.latest_attestation(s, image_pk)
            result.attestation = newest.digest if newest is not None else result.attestation
        result.regions_reached = sorted(r for r, rr in promo.regions.items() if rr.state == "done")
        if promo.state == "already_promoted":  # nothing copied: the pointers already name it
            result.regions_reached = [
                r for r in regions if provider.get_pointer(resolved.name, r) == image_id
            ]
        st.note(f"{promo.state}: {', '.join(result.regions_reached) or 'no region'}")
    result.outcome = "promoted" if promo.state in ("promoted", "already_promoted") else "failed"
    if result.outcome != "promoted":
        result.error = f"promotion ended {promo.state}"


def run_trust() -> list[Key]:
    """The keys the local run signs with and trusts. Without a configured signer the run
    creates the state folder's key itself, explicitly (the local demonstration: the one
    place besides ``imagectl attest`` that makes a key), and trusts exactly it; with
    ``$IMAGECTL_ATTESTATION_TRUST`` set it trusts that file, as every verifier does."""
    if not os.environ.get(ENV_SIGNER, "").strip():
        ensure_local_key()
    if os.environ.get(ENV_TRUST, "").strip():
        return load_trust()
    return [load_signer()[1]]


def _blocked_reason(catalog: Catalog, image_id: str, region: str) -> str:
    with catalog.transaction() as s:
        row = repo.find_image(s, CLOUD, region, image_id)
        return (row.blocked_reason if row is not None else None) or "blocked"
