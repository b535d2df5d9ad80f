"""``promote()``: the gated, parallel, resumable promotion of one image.

Sequence (each step recorded before/after its side effect, see ``records.py``):

1. Take the stack's promotion lock (``catalog.locks.promotion_lock``): a second promotion
   of the same stack and cloud waits ``lock_wait_s`` then fails with exit 1.
2. Gate (``gate.py``, and the image's signed attestation: ``imagectl.provenance``) unless
   resuming; ``force`` with a ``reason`` overrides it and writes
   a ``promotion.forced`` event naming who, why and which rules were overridden.
   A revoked image (``imagectl revoke``) is refused, and ``force`` does not override that.
3. Every target region in parallel (one thread each; one failure never cancels the
   others): copy with an idempotency token -> wait until available -> record the replica
   in the catalog -> tag -> share with the stack's ``share`` settings.
4. Only when every target region succeeded: the attestation is signed again naming every
   region's copy (``provenance.attest``: a copy verifies by what the signed statement
   names, never by its tags; a forced promotion past the attestation signs nothing),
   then flip the "latest" pointer of every region (cloud first, then the catalog, which
   keeps the previous one), tag the replicas ``promoted`` and close the promotion: the
   image and its replicas become ``promoted``.
   Otherwise the promotion closes ``partial``: the image is ``partially_promoted``, no
   pointer moved, and ``PromotionResult.resume_command`` says how to finish.
5. Retention (``retention.py``): promoted images beyond ``retention.keep_last`` are
   deprecated unless a pointer or a running instance still uses them.

A killed run leaves the image ``promoting`` with an open promotion (or
``partially_promoted``); running ``promote`` again resumes it without copying twice.

This module opens the promotion (lock, gate, resume); ``regions.py`` does step 3,
``finish.py`` step 4, ``retention.py`` step 5; ``results.py`` holds what it returns.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from imagectl.actor import current_actor
from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.locks import promotion_lock
from imagectl.catalog.models import Image, Promotion
from imagectl.clouds.base import Provider
from imagectl.clouds.registry import cloud_spec
from imagectl.core.errors import EXIT_BAD_INPUT, CloudError, UserError
from imagectl.promotion import records as rec
from imagectl.promotion.finish import close_partial, flip_and_close
from imagectl.promotion.gate import (
    GateRefused,
    ImageBlocked,
    check_gate,
    refusal_hint,
    sandbox_receipts,
)
from imagectl.promotion.groups import group_rows
from imagectl.promotion.regions import RegionRun
from imagectl.promotion.resolve import ImageRef, resolve_image
from imagectl.promotion.results import Progress, PromotionResult, RegionResult
from imagectl.promotion.retention import apply_retention
from imagectl.provenance.attest import attest_image
from imagectl.provenance.keys import load_signer, load_trust
from imagectl.provenance.revocations import revoked_elsewhere
from imagectl.provenance.verify import verify_image
from imagectl.stacks.resolve import ResolvedStack, stack_digest
from imagectl.stacks.schema import Stack
from imagectl.tags import TAG_REVOKED

if TYPE_CHECKING:
    # the class's own module: securesystemslib.signer imports it without re-exporting
    from securesystemslib.signer._key import Key

DEFAULT_TIMEOUT_S = 3600.0


def _stack_parts(stack: ResolvedStack | Stack) -> tuple[Stack, str]:
    """(Stack model, digest) from a ResolvedStack or a Stack."""
    if isinstance(stack, ResolvedStack):
        return stack.stack, stack.digest
    return stack, stack_digest(stack)


def target_regions(stack: Stack, cloud: str, regions: list[str] | None) -> list[str]:
    allowed = list(cloud_spec(cloud).settings(stack).regions)
    if not regions:
        return allowed
    unknown = [r for r in regions if r not in allowed]
    if unknown:
        raise UserError(
            f"region(s) {', '.join(unknown)} are not targets of stack {stack.name} on {cloud}",
            hint=f"The stack's {cloud} regions are: {', '.join(allowed)}",
        )
    return list(dict.fromkeys(regions))


def _open_promotion(session: Session, image: Image) -> Promotion | None:
    query = (
        select(Promotion)
        .where(Promotion.image_id == image.id, Promotion.state == "running")
        .order_by(Promotion.id.desc())
    )
    return session.scalars(query).first()


def _last_promotion(session: Session, image: Image) -> Promotion | None:
    query = select(Promotion).where(Promotion.image_id == image.id).order_by(Promotion.id.desc())
    return session.scalars(query).first()


def promote(
    catalog: Catalog,
    provider: Provider,
    stack: ResolvedStack | Stack,
    image: ImageRef,
    *,
    regions: list[str] | None = None,
    force: bool = False,
    reason: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    lock_wait_s: float = 0.0,
    poll_s: float | None = None,
    timeout_s: float | None = None,
    retention: bool = True,
    actor: str | None = None,
    trusted: list[Key] | None = None,
) -> PromotionResult:
    """Promote ``image`` (catalog id, ``Image`` row or cloud image id) of ``stack``
    (``ResolvedStack`` or ``Stack``) through ``provider``; see the module docstring.

    Raises ``GateRefused`` / ``ImageBlocked`` (exit 1), ``PromotionLocked`` (exit 1) or
    ``UserError`` (exit 2); otherwise returns a ``PromotionResult`` whose ``state`` is
    promoted, partially_promoted, failed, already_promoted or dry_run. ``trusted``: the
    keys the attestation must be signed by (default: ``provenance.keys.load_trust``, the
    repository's pinned anchor).
    """
    model, digest = _stack_parts(stack)
    cloud = provider.cloud
    settings = provider.spec.settings(model)
    targets = target_regions(model, cloud, regions)
    actor = actor or current_actor()
    if force and not (reason or "").strip():
        raise UserError("--force needs --reason '...': a forced promotion records who and why")
    poll = poll_s if poll_s is not None else float(getattr(provider, "poll_interval_s", 2.0))
    if timeout_s is None:  # the stack's wait for one region's copy (large AMIs: hours)
        timeout_s = 60.0 * getattr(settings, "copy_timeout_minutes", DEFAULT_TIMEOUT_S / 60)
    started = time.monotonic()

    with catalog.transaction() as s:
        img = resolve_image(s, image, stack=model.name, cloud=cloud)
        pk, label = img.id, img.label
        # the published list and the cloud's tag, beside the catalog's rows (the gate):
        # no single store can un-revoke an image, and --force does not override them
        elsewhere = revoked_elsewhere(
            s, img, lambda: trusted if trusted is not None else load_trust(), provider
        )
        revoked_hint = refusal_hint(s, img, revoked=True)
        unread_hint = refusal_hint(s, img, unreadable=True)
    if elsewhere:
        # a store that names a revocation, or one that could not be read (which might)
        revoked = [r for r in elsewhere if "revokes it" in r or "names revocation" in r]
        raise ImageBlocked(label, elsewhere, hint=revoked_hint if revoked else unread_hint)
    if dry_run:
        return _dry_run(catalog, pk, model, cloud, digest, targets, force, trusted)

    with promotion_lock(catalog, model.name, cloud, wait_s=lock_wait_s):
        with catalog.transaction() as s:
            img = repo.image_row(s, pk)
            result = PromotionResult(model.name, cloud, img.cloud_image_id, img.id, "failed")
            refusal: GateRefused | None = None
            if img.state == ImageState.PROMOTED.value:
                group = {r.id for r in group_rows(s, img)}
                elsewhere = [
                    r
                    for r in targets
                    if getattr(repo.get_pointer(s, model.name, cloud, r), "image_id", None)
                    not in group
                ]
                if elsewhere:
                    raise UserError(
                        f"image {img.label} is already promoted, but not in "
                        f"{', '.join(elsewhere)}: a promoted image is not promoted again",
                        hint="Promote a newer validated image to every region instead",
                    )
                result.state = "already_promoted"
                result.promotion_id = getattr(_last_promotion(s, img), "id", None)
            else:
                promo = _begin(
                    s, img, model, digest, targets, force, reason, actor, result, trusted
                )
                if isinstance(promo, GateRefused):
                    refusal = promo
                else:
                    refusal = None
                    result.promotion_id = promo.id
                    targets = list(promo.target_regions)
        if refusal is not None:
            raise refusal  # after the commit: the refusal stays in the event log
        if result.state == "already_promoted":
            _finish_retention(catalog, provider, model, cloud, actor, progress, result, retention)
            result.seconds = time.monotonic() - started
            return result
        assert result.promotion_id is not None
        with catalog.transaction() as s:
            resign = not result.forced and repo.latest_attestation(s, pk) is not None
        if resign:
            load_signer()  # the copies are attested before any pointer moves: signer first
        source = provider.get_image(result.image_id, _region_of(catalog, pk))
        if source is None:
            raise CloudError(
                f"image {result.image_id} is not in {cloud} any more",
                hint="Check the cloud console; the catalog and the cloud disagree",
            )
        run = RegionRun(
            catalog,
            provider,
            model,
            settings,
            pk,
            source,
            result.promotion_id,
            progress,
            poll,
            timeout_s,
            actor,
        )
        with catalog.transaction() as s:
            folded = rec.fold(repo.events(s, image=pk, kind=rec.REGION), targets)
        now = _regions_this_run(targets, regions, folded)
        run.request_copies({r: folded[r] for r in now})
        with ThreadPoolExecutor(max_workers=max(1, len(now))) as pool:
            outcomes = {o.region: o for o in pool.map(run.region, [folded[r] for r in now])}
        result.regions = {r: outcomes.get(r) or _not_attempted(r) for r in targets}
        failed = [r for r, o in result.regions.items() if o.state != "done"]
        if failed:
            close_partial(catalog, run, result, targets, failed)
        else:
            if resign:
                attest_image(catalog, pk, provider)  # now naming every region's copy
            flip_and_close(catalog, run, result, targets)
            _finish_retention(catalog, provider, model, cloud, actor, progress, result, retention)
    result.seconds = time.monotonic() - started
    return result


def _regions_this_run(
    targets: list[str], asked: list[str] | None, folded: dict[str, rec.RegionProgress]
) -> list[str]:
    """The regions this run works on: every target, or, when ``--regions`` names some on a
    resume (whose targets are the earlier promotion's too), those and the ones already
    done. A region not named is not copied again; it stays for a later resume."""
    if not asked:
        return list(targets)
    return [r for r in targets if r in asked or folded[r].done]


def _not_attempted(region: str) -> RegionResult:
    return RegionResult(
        region, "not_attempted", error="not in --regions on this resume: left for a later run"
    )


def _region_of(catalog: Catalog, pk: int) -> str:
    with catalog.transaction() as s:
        return repo.image_row(s, pk).region


def _begin(
    s: Session,
    img: Image,
    model: Stack,
    digest: str,
    targets: list[str],
    force: bool,
    reason: str | None,
    actor: str,
    result: PromotionResult,
    trusted: list[Key] | None = None,
) -> Promotion | GateRefused:
    """Open (or reopen) the promotion row, after the gate for a fresh one; the gate's
    refusal is returned (the caller raises it after the commit)."""
    open_promo = _open_promotion(s, img)
    if img.state == ImageState.PROMOTING.value and open_promo is not None:
        result.resumed = True
        result.forced = open_promo.forced
        repo.log_event(
            s,
            "promotion.resumed",
            f"promotion {open_promo.id} of {img.label} resumed after an interruption",
            image=img,
            actor=actor,
            details={"promotion": open_promo.id},
        )
        return open_promo
    if img.state == ImageState.PARTIALLY_PROMOTED.value:
        last = _last_promotion(s, img)
        earlier = list(last.target_regions) if last else []
        regions = targets + [r for r in earlier if r not in targets]
        result.resumed = True
        promo = repo.start_promotion(
            s,
            img,
            target_regions=regions,
            actor=actor,
            forced=bool(last and last.forced),
            force_reason=last.force_reason if last else None,
        )
        for row in group_rows(s, img):
            if row.id != img.id and row.state == ImageState.PARTIALLY_PROMOTED.value:
                repo.set_state(
                    s,
                    row,
                    ImageState.PROMOTING,
                    reason=f"promotion {promo.id} resumed",
                    actor=actor,
                )
        repo.log_event(
            s,
            "promotion.resumed",
            f"promotion of {img.label} resumed as {promo.id}",
            image=img,
            actor=actor,
            details={"promotion": promo.id, "previous_promotion": last.id if last else None},
        )
        result.forced = promo.forced
        return promo
    revoked = revoked_reasons(s, img)
    if revoked:
        repo.log_event(
            s, "promotion.gate", f"gate for {img.label}: {'; '.join(revoked)}", image=img,
            actor=actor, details={"passed": False, "reasons": revoked, "forced": force},
        )  # fmt: skip
        # --force does not override a revocation
        return ImageBlocked(img.label, revoked, hint=refusal_hint(s, img, revoked=True))
    reasons = gate_reasons(s, img, model, digest, trusted)
    sandbox = sandbox_receipts(s, img)
    repo.log_event(
        s,
        "promotion.gate",
        f"gate for {img.label}: "
        + ("passed" if not reasons else "; ".join(reasons))
        + (f" (on sandbox replay receipts: {', '.join(sandbox)})" if sandbox else ""),
        image=img,
        actor=actor,
        details={"passed": not reasons, "reasons": reasons, "forced": force, "sandbox": sandbox},
    )
    if reasons and not force:
        cls = ImageBlocked if img.state == ImageState.BLOCKED.value else GateRefused
        return cls(img.label, reasons, hint=refusal_hint(s, img))
    if force:
        result.forced, result.overridden = True, reasons
        repo.log_event(
            s,
            "promotion.forced",
            f"forced promotion of {img.label} by {actor}: {reason}",
            image=img,
            actor=actor,
            details={"reason": reason, "overridden": reasons, "actor": actor},
        )
    promo = repo.start_promotion(
        s,
        img,
        target_regions=targets,
        forced=force,
        force_reason=reason if force else None,
        actor=actor,
    )
    repo.log_event(
        s,
        "promotion.started",
        f"promotion {promo.id} of {img.label} to {', '.join(targets)} started",
        image=img,
        actor=actor,
        details={"promotion": promo.id, "regions": targets, "forced": force},
    )
    return promo


def revoked_reasons(s: Session, img: Image) -> list[str]:
    """A revoked image is never promoted (``imagectl revoke``; not even with --force)."""
    rows = [r for r in repo.revocations(s, img.stack) if r.image_id == img.id]
    if rows:
        return [f"the image is revoked ({rows[0].reason}; revocation {rows[0].digest[:19]})"]
    if img.tags.get(TAG_REVOKED):
        return [f"the image is revoked (revocation {str(img.tags[TAG_REVOKED])[:19]})"]
    return []


def gate_reasons(
    s: Session, img: Image, model: Stack, digest: str, trusted: list[Key] | None = None
) -> list[str]:
    """The gate's refusals for ``img`` under the stack's validation settings, and its
    signed attestation's (``imagectl.provenance.verify``)."""
    reasons = check_gate(
        s,
        img,
        stack_digest=digest,
        max_age_hours=model.validation.max_receipt_age_hours,
        required_profile=model.validation.profile,
        required_shapes=list(cloud_spec(img.cloud).settings(model).validation_shapes),
        required_nodes=model.validation.nodes,
        required_toolkit=(
            model.validation.toolkit.model_dump(include={"torch", "cuda"})
            if model.validation.toolkit is not None
            else None
        ),
    )
    keys = trusted if trusted is not None else load_trust()
    return reasons + [f"attestation: {r}" for r in verify_image(s, img, keys).reasons]


def _dry_run(
    catalog: Catalog,
    pk: int,
    model: Stack,
    cloud: str,
    digest: str,
    targets: list[str],
    force: bool,
    trusted: list[Key] | None,
) -> PromotionResult:
    with catalog.transaction() as s:
        img = repo.image_row(s, pk)
        result = PromotionResult(model.name, cloud, img.cloud_image_id, img.id, "dry_run")
        revoked = revoked_reasons(s, img)
        if revoked:
            raise ImageBlocked(img.label, revoked, hint=refusal_hint(s, img, revoked=True))
        if img.state in (ImageState.VALIDATED, ImageState.BLOCKED):
            reasons = gate_reasons(s, img, model, digest, trusted)
            if reasons and not force:
                cls = ImageBlocked if img.state == ImageState.BLOCKED else GateRefused
                raise cls(img.label, reasons, hint=refusal_hint(s, img))
            result.overridden, result.forced = reasons, force
        for region in targets:
            ptr = repo.get_pointer(s, model.name, cloud, region)
            result.previous_pointers[region] = ptr.image.cloud_image_id if ptr else None
            result.regions[region] = RegionResult(region, "planned")
    return result


def _finish_retention(
    catalog: Catalog,
    provider: Provider,
    model: Stack,
    cloud: str,
    actor: str,
    progress: Progress | None,
    result: PromotionResult,
    enabled: bool,
) -> None:
    if not enabled:
        return
    outcome = apply_retention(
        catalog, provider, model.name, cloud, keep_last=model.retention.keep_last, actor=actor
    )
    result.deprecated = outcome.deprecated
    result.retention_skipped = outcome.skipped
    if progress is not None:
        for line in outcome.deprecated:
            progress("retention", "deprecated", line)
        for line in outcome.skipped:
            progress("retention", "kept", line)


__all__ = [
    "EXIT_BAD_INPUT",
    "PromotionResult",
    "RegionResult",
    "promote",
    "resolve_image",
]
