"""The catalog's write and read API. Every function takes an open ``Session`` first, so a
caller can group several steps in one transaction::

    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    catalog = open_catalog()
    with catalog.transaction() as s:
        build = repo.record_build(s, build_id="b-1", stack="local", stack_digest="sha256:..",
                                  cloud="local")
        image = repo.record_image(s, build=build, cloud_image_id="/var/lib/x.qcow2",
                                  region="local-a")
        repo.set_state(s, image, "validating", reason="validation started")

Writers
    record_build(s, *, build_id, stack, stack_digest, cloud, git_commit=None,
                 packer_manifest=None, artifact_id=None, started_at=None) -> Build
    finish_build(s, build, *, outcome, finished_at=None, packer_manifest=None,
                 artifact_id=None) -> Build
    record_image(s, *, cloud_image_id, region, build=None, cloud=None, stack=None,
                 stack_digest=None, tags=None, state=ImageState.BUILT, created_at=None) -> Image
    set_state(s, image, new_state, *, reason, actor=None, force=False,
              blocked_reason=None, details=None) -> Image
    record_receipt(s, image, *, shape, host, receipt: Receipt, received_at=None) -> ValidationRun
    start_promotion(s, image, *, target_regions, forced=False, force_reason=None,
                    actor=None) -> Promotion
    finish_promotion(s, promotion, *, completed_regions, message=None,
                     actor=None) -> Promotion
    set_pointer(s, stack, cloud, region, image, *, actor=None, reason=None) -> Pointer
    log_event(s, kind, message, *, stack=None, cloud=None, image=None, actor=None,
              details=None) -> Event
Readers
    get_image(s, image_id) / find_image(s, cloud, region, cloud_image_id) -> Image | None
    get_pointer(s, stack, cloud, region) -> Pointer | None
    list_pointers(s, stack=None, cloud=None) -> list[Pointer]
    list_images(s, stack=None, cloud=None, state=None, region=None) -> list[Image]
    receipts(s, image) -> list[ValidationRun]
    events(s, stack=None, cloud=None, image=None, kind=None, limit=None) -> list[Event]
    stacks_and_clouds(s) -> list[tuple[str, str]]

``actor`` defaults to ``$IMAGECTL_ACTOR`` or the OS user. Every state change, receipt,
promotion step and pointer move writes an ``Event``. Objects stay readable after the
transaction ends (the session factory does not expire on commit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from imagectl.actor import current_actor
from imagectl.catalog.lifecycle import ImageState, check_transition, parse_state
from imagectl.catalog.models import (
    Attestation,
    Build,
    Event,
    Image,
    Pointer,
    PointerFlip,
    Promotion,
    Revocation,
    Sbom,
    ValidationRun,
    utcnow,
)
from imagectl.core.errors import UserError
from imagectl.validators.receipt import Receipt

BUILD_OUTCOMES = ("running", "succeeded", "failed", "cancelled")
# A "latest" pointer never moves to these images.
NEVER_LATEST = (ImageState.BLOCKED.value, ImageState.DELETED.value)


Row = TypeVar("Row", Image, Build, Promotion)


def _row(session: Session, model: type[Row], row: Row | int) -> Row:
    """The row itself, or the row with that catalog id (a clear error when there is none)."""
    if isinstance(row, model):
        return row
    found = session.get(model, row)
    if found is None:
        raise UserError(
            f"no {model.__name__.lower()} with catalog id {row}", hint="Run `imagectl status`"
        )
    return found


def image_row(session: Session, image: Image | int) -> Image:
    """The image row itself or by catalog id; a clear error (exit 2) when there is none."""
    return _row(session, Image, image)


def log_event(
    session: Session,
    kind: str,
    message: str,
    *,
    stack: str | None = None,
    cloud: str | None = None,
    image: Image | None = None,
    actor: str | None = None,
    details: dict[str, object] | None = None,
) -> Event:
    """Append one event. ``stack``/``cloud`` default to the image's."""
    if image is not None:
        stack = stack or image.stack
        cloud = cloud or image.cloud
    row = Event(
        at=utcnow(),
        actor=actor or current_actor(),
        stack=stack,
        cloud=cloud,
        image=image,
        kind=kind,
        message=message,
        details=dict(details or {}),
    )
    session.add(row)
    session.flush()
    return row


def record_build(
    session: Session,
    *,
    build_id: str,
    stack: str,
    stack_digest: str,
    cloud: str,
    git_commit: str | None = None,
    packer_manifest: dict[str, object] | None = None,
    artifact_id: str | None = None,
    started_at: datetime | None = None,
    actor: str | None = None,
    base_image: dict[str, object] | None = None,
) -> Build:
    """Record a build that has started (outcome 'running'); ``base_image`` is the base it
    starts from (``BaseImage.to_dict()``)."""
    if session.scalar(select(Build).where(Build.build_id == build_id)) is not None:
        raise UserError(f"build {build_id} is already in the catalog", hint="Use a new build id")
    build = Build(
        build_id=build_id,
        stack=stack,
        stack_digest=stack_digest,
        cloud=cloud,
        git_commit=git_commit,
        packer_manifest=packer_manifest,
        artifact_id=artifact_id,
        started_at=started_at or utcnow(),
        outcome="running",
        base_image_id=str(base_image["id"]) if base_image else None,
        base_image=base_image,
    )
    session.add(build)
    session.flush()
    log_event(
        session, "build.started", f"build {build_id} of {stack} on {cloud} started",
        stack=stack, cloud=cloud, actor=actor,
        details={"build_id": build_id, "stack_digest": stack_digest, "git_commit": git_commit,
                 "base_image": base_image["id"] if base_image else None},
    )  # fmt: skip
    return build


def finish_build(
    session: Session,
    build: Build | int,
    *,
    outcome: str,
    finished_at: datetime | None = None,
    packer_manifest: dict[str, object] | None = None,
    artifact_id: str | None = None,
    actor: str | None = None,
) -> Build:
    """Record how a build ended: succeeded, failed or cancelled."""
    if outcome not in BUILD_OUTCOMES[1:]:
        raise UserError(
            f"unknown build outcome '{outcome}'", hint="Use succeeded, failed or cancelled"
        )
    build = _row(session, Build, build)
    build.outcome = outcome
    build.finished_at = finished_at or utcnow()
    if packer_manifest is not None:
        build.packer_manifest = packer_manifest
    if artifact_id is not None:
        build.artifact_id = artifact_id
    session.flush()
    log_event(
        session, f"build.{outcome}", f"build {build.build_id} {outcome}",
        stack=build.stack, cloud=build.cloud, actor=actor,
        details={"build_id": build.build_id, "artifact_id": build.artifact_id},
    )  # fmt: skip
    return build


def record_image(
    session: Session,
    *,
    cloud_image_id: str,
    region: str,
    build: Build | None = None,
    cloud: str | None = None,
    stack: str | None = None,
    stack_digest: str | None = None,
    tags: Mapping[str, object] | None = None,
    state: str | ImageState = ImageState.BUILT,
    created_at: datetime | None = None,
    actor: str | None = None,
) -> Image:
    """Record one image in one region. ``cloud``/``stack``/``stack_digest`` default to the
    build's; without a build all three are required."""
    cloud = cloud or (build.cloud if build else None)
    stack = stack or (build.stack if build else None)
    stack_digest = stack_digest or (build.stack_digest if build else None)
    if not (cloud and stack and stack_digest):
        raise UserError(
            f"image {cloud_image_id} needs a cloud, stack and stack digest",
            hint="Pass build= or all three",
        )
    if find_image(session, cloud, region, cloud_image_id) is not None:
        raise UserError(
            f"image {cloud_image_id} in {cloud}/{region} is already in the catalog",
            hint="Use find_image() to fetch it",
        )
    now = created_at or utcnow()
    image = Image(
        cloud_image_id=cloud_image_id,
        cloud=cloud,
        region=region,
        stack=stack,
        stack_digest=stack_digest,
        build=build,
        state=parse_state(state).value,
        created_at=now,
        state_changed_at=now,
        tags=dict(tags or {}),
    )
    session.add(image)
    session.flush()
    log_event(
        session, "image.recorded", f"image {image.label} recorded as {image.state}",
        image=image, actor=actor,
        details={"build_id": build.build_id if build else None, "tags": image.tags},
    )  # fmt: skip
    return image


def set_state(
    session: Session,
    image: Image | int,
    new_state: str | ImageState,
    *,
    reason: str,
    actor: str | None = None,
    force: bool = False,
    blocked_reason: str | None = None,
    details: dict[str, object] | None = None,
) -> Image:
    """Move ``image`` to ``new_state`` if the lifecycle allows it; write an event.

    Raises ``IllegalTransition`` otherwise. Moving to ``blocked`` records ``blocked_reason``
    (default: ``reason``); ``force`` allows the moves in ``FORCED_TRANSITIONS``.
    """
    img = image_row(session, image)
    old = parse_state(img.state)
    target = check_transition(img.label, old, new_state, forced=force)
    if target is ImageState.BLOCKED:
        img.blocked_reason = blocked_reason or reason
    img.state = target.value
    img.state_changed_at = utcnow()
    session.flush()
    log_event(
        session, "image.state", f"{img.label}: {old.value} -> {target.value}: {reason}",
        image=img, actor=actor,
        details={"from": old.value, "to": target.value, "reason": reason, "forced": force,
                 **(details or {})},
    )  # fmt: skip
    return img


def record_receipt(
    session: Session,
    image: Image | int,
    *,
    shape: str,
    host: str,
    receipt: Receipt,
    received_at: datetime | None = None,
    actor: str | None = None,
) -> ValidationRun:
    """Store one validator receipt for an image (does not change its state). Profile,
    verdict, worst action and validator version are the receipt's own (the model has
    validated them)."""
    img = image_row(session, image)
    run = ValidationRun(
        image=img,
        shape=shape,
        host=host,
        profile=receipt.profile,
        verdict=receipt.verdict,
        worst_action=receipt.worst_action.value,
        receipt=receipt.model_dump(mode="json"),
        received_at=received_at or utcnow(),
        validator_version=receipt.validator_version,
    )
    session.add(run)
    session.flush()
    log_event(
        session, "validation.receipt",
        f"{img.label}: {receipt.verdict} on {shape} host {host} "
        f"(worst action {receipt.worst_action.value})",
        image=img, actor=actor,
        details={"run_id": run.id, "shape": shape, "host": host, "verdict": receipt.verdict},
    )  # fmt: skip
    return run


def start_promotion(
    session: Session,
    image: Image | int,
    *,
    target_regions: Sequence[str],
    forced: bool = False,
    force_reason: str | None = None,
    actor: str | None = None,
) -> Promotion:
    """Open a promotion of ``image`` to ``target_regions`` and move it to 'promoting'.

    Hold ``locks.promotion_lock`` for the stack and cloud around the whole promotion.
    A forced promotion needs ``force_reason``.
    """
    img = image_row(session, image)
    if not target_regions:
        raise UserError(f"promotion of {img.label} names no target region")
    if forced and not (force_reason or "").strip():
        raise UserError(
            f"forced promotion of {img.label} needs a reason", hint="Pass --reason '...'"
        )
    actor = actor or current_actor()
    from_state = img.state
    promo = Promotion(
        stack=img.stack,
        cloud=img.cloud,
        image=img,
        target_regions=list(target_regions),
        completed_regions=[],
        state="running",
        from_state=from_state,
        started_at=utcnow(),
        forced=forced,
        force_reason=force_reason if forced else None,
        actor=actor,
    )
    why = f"promotion to {', '.join(target_regions)} started"
    if forced:
        why += f" (forced: {force_reason})"
    set_state(session, img, ImageState.PROMOTING, reason=why, actor=actor, force=forced)
    session.add(promo)
    session.flush()
    return promo


def finish_promotion(
    session: Session,
    promotion: Promotion | int,
    *,
    completed_regions: Iterable[str],
    message: str | None = None,
    actor: str | None = None,
) -> Promotion:
    """Close a promotion: every target done -> promoted; some -> partially_promoted;
    none -> the image returns to the state the promotion started from."""
    promotion = _row(session, Promotion, promotion)
    if promotion.state != "running":
        raise UserError(
            f"promotion {promotion.id} of {promotion.stack} on {promotion.cloud} already "
            f"finished ({promotion.state})",
            hint="Start a new promotion to resume it",
        )
    done = [r for r in promotion.target_regions if r in set(completed_regions)]
    missing = [r for r in promotion.target_regions if r not in done]
    img = promotion.image
    if not missing:
        promotion.state, target = "succeeded", ImageState.PROMOTED
    elif done:
        promotion.state, target = "partial", ImageState.PARTIALLY_PROMOTED
    else:
        promotion.state, target = "failed", parse_state(promotion.from_state)
    promotion.completed_regions = done
    promotion.finished_at = utcnow()
    promotion.message = message
    reason = (
        f"promotion {promotion.state}: switched {', '.join(done) or 'no region'}; "
        f"missing {', '.join(missing) or 'none'}"
    )
    if message:
        reason += f": {message}"
    set_state(session, img, target, reason=reason, actor=actor, details={"promotion": promotion.id})
    return promotion


def set_pointer(
    session: Session,
    stack: str,
    cloud: str,
    region: str,
    image: Image | int,
    *,
    actor: str | None = None,
    reason: str | None = None,
) -> Pointer:
    """Point "latest" of stack/cloud/region at ``image``; the old target becomes previous.

    The image must belong to that stack, cloud and region, and not be blocked or deleted.
    """
    img = image_row(session, image)
    if (img.stack, img.cloud, img.region) != (stack, cloud, region):
        raise UserError(
            f"image {img.label} cannot be latest of {stack} on {cloud}/{region}",
            hint="Point a region at an image of the same stack, cloud and region",
        )
    if img.state in NEVER_LATEST:
        raise UserError(
            f"image {img.label} is {img.state} and cannot become latest of {stack} on "
            f"{cloud}/{region}",
            hint="Pick a validated or promoted image",
        )
    actor = actor or current_actor()
    pointer = get_pointer(session, stack, cloud, region)
    previous_id: int | None = None
    if pointer is None:
        pointer = Pointer(stack=stack, cloud=cloud, region=region, image=img, updated_by=actor)
        session.add(pointer)
    else:
        if pointer.image_id != img.id:
            pointer.previous_image_id = pointer.image_id
        previous_id = pointer.previous_image_id
        pointer.image = img
        pointer.updated_by = actor
    pointer.updated_at = utcnow()
    session.flush()
    text = f"latest of {stack} on {cloud}/{region} -> {img.cloud_image_id}"
    if reason:
        text += f": {reason}"
    log_event(
        session, "pointer.set", text, image=img, actor=actor,
        details={"region": region, "image_id": img.id, "previous_image_id": previous_id},
    )  # fmt: skip
    return pointer


def start_flips(
    session: Session,
    promotion_id: int,
    stack: str,
    cloud: str,
    targets: dict[str, tuple[int | None, int]],
) -> list[PointerFlip]:
    """Record each region's coming pointer move (``region -> (from, to)`` catalog ids) as
    ``pending``, once per promotion and region (a re-run keeps the first record)."""
    existing = {f.region: f for f in flips(session, promotion_id=promotion_id)}
    for region, (from_pk, to_pk) in targets.items():
        if region in existing:
            continue
        flip = PointerFlip(
            promotion_id=promotion_id,
            stack=stack,
            cloud=cloud,
            region=region,
            from_image_id=from_pk,
            to_image_id=to_pk,
            state="pending",
        )
        session.add(flip)
        existing[region] = flip
    session.flush()
    return [existing[r] for r in targets]


def mark_flip(session: Session, promotion_id: int, region: str, state: str) -> None:
    for flip in flips(session, promotion_id=promotion_id):
        if flip.region == region:
            flip.state = state
            flip.updated_at = utcnow()
    session.flush()


def flips(
    session: Session,
    *,
    promotion_id: int | None = None,
    stack: str | None = None,
    cloud: str | None = None,
    state: str | None = None,
) -> list[PointerFlip]:
    query = (
        select(PointerFlip)
        .options(selectinload(PointerFlip.to_image), selectinload(PointerFlip.from_image))
        .order_by(PointerFlip.promotion_id, PointerFlip.region)
    )
    if promotion_id is not None:
        query = query.where(PointerFlip.promotion_id == promotion_id)
    if stack:
        query = query.where(PointerFlip.stack == stack)
    if cloud:
        query = query.where(PointerFlip.cloud == cloud)
    if state:
        query = query.where(PointerFlip.state == state)
    return list(session.scalars(query))


def half_done_flips(
    session: Session, *, stack: str | None = None, cloud: str | None = None
) -> dict[int, list[PointerFlip]]:
    """Flips that stopped half way: promotion id -> its flips, for every promotion with
    at least one region ``pending`` and at least one ``done``."""
    by_promotion: dict[int, list[PointerFlip]] = {}
    for flip in flips(session, stack=stack, cloud=cloud):
        by_promotion.setdefault(flip.promotion_id, []).append(flip)
    return {
        pid: group
        for pid, group in by_promotion.items()
        if {f.state for f in group} >= {"pending", "done"}
    }


def get_image(session: Session, image_id: int) -> Image | None:
    return session.get(Image, image_id)


def find_build(session: Session, build_id: str) -> Build | None:
    return session.scalar(select(Build).where(Build.build_id == build_id))


def find_image(session: Session, cloud: str, region: str, cloud_image_id: str) -> Image | None:
    return session.scalar(
        select(Image).where(
            Image.cloud == cloud, Image.region == region, Image.cloud_image_id == cloud_image_id
        )
    )


def get_pointer(session: Session, stack: str, cloud: str, region: str) -> Pointer | None:
    return session.scalar(
        select(Pointer).where(
            Pointer.stack == stack, Pointer.cloud == cloud, Pointer.region == region
        )
    )


def list_pointers(
    session: Session, *, stack: str | None = None, cloud: str | None = None
) -> list[Pointer]:
    query = (
        select(Pointer)
        .options(
            selectinload(Pointer.image).selectinload(Image.build),
            selectinload(Pointer.previous_image).selectinload(Image.build),
        )
        .order_by(Pointer.stack, Pointer.cloud, Pointer.region)
    )
    if stack:
        query = query.where(Pointer.stack == stack)
    if cloud:
        query = query.where(Pointer.cloud == cloud)
    return list(session.scalars(query))


def list_images(
    session: Session,
    *,
    stack: str | None = None,
    cloud: str | None = None,
    state: str | ImageState | Iterable[str | ImageState] | None = None,
    region: str | None = None,
) -> list[Image]:
    """Images filtered by stack, cloud, region and state(s), newest first."""
    query = (
        select(Image)
        .options(selectinload(Image.build))
        .order_by(Image.created_at.desc(), Image.id.desc())
    )
    if stack:
        query = query.where(Image.stack == stack)
    if cloud:
        query = query.where(Image.cloud == cloud)
    if region:
        query = query.where(Image.region == region)
    if state is not None:
        states = [state] if isinstance(state, str | ImageState) else list(state)
        query = query.where(Image.state.in_([parse_state(s).value for s in states]))
    return list(session.scalars(query))


def receipts(session: Session, image: Image | int) -> list[ValidationRun]:
    img = image_row(session, image)
    query = select(ValidationRun).where(ValidationRun.image_id == img.id)
    return list(session.scalars(query.order_by(ValidationRun.received_at, ValidationRun.id)))


def record_sbom(
    session: Session,
    build_pk: int,
    *,
    digest: str,
    document: dict[str, object],
    inventory: dict[str, object],
    held: list[str],
) -> Sbom:
    """Store (or replace) a build's SBOM and the inventory it was rendered from."""
    row = session.scalars(select(Sbom).where(Sbom.build_pk == build_pk)).first()
    if row is None:
        row = Sbom(build_pk=build_pk, digest=digest, document=document, inventory=inventory,
                   held=held)  # fmt: skip
        session.add(row)
    else:
        row.digest, row.document, row.inventory, row.held = digest, document, inventory, held
    session.flush()
    return row


def sbom_of(session: Session, image: Image | int) -> Sbom | None:
    """The SBOM of the build that made ``image`` (a replica shares its source's build)."""
    img = image_row(session, image)
    if img.build_pk is None:
        return None
    return session.scalars(select(Sbom).where(Sbom.build_pk == img.build_pk)).first()


def latest_receipts(session: Session, image: Image | int) -> list[ValidationRun]:
    """The newest receipt of every validation shape of ``image`` (what the gate judges
    and an attestation signs), and of every shape's fabric receipt (host ``fabric``: a
    multi-node run's, imagectl.validation.fabric.receipt) beside it."""
    newest: dict[tuple[str, bool], ValidationRun] = {}
    for run in receipts(session, image):  # oldest first
        newest[(run.shape, run.host == "fabric")] = run
    return list(newest.values())


def record_attestation(
    session: Session, image: Image | int, *, digest: str, keyid: str, envelope: dict[str, object]
) -> Attestation:
    """Store a signed attestation of ``image`` (``imagectl.provenance.attest``)."""
    row = Attestation(
        image=image_row(session, image), digest=digest, keyid=keyid, envelope=envelope
    )
    session.add(row)
    session.flush()
    return row


def latest_attestation(session: Session, image: Image | int) -> Attestation | None:
    """The newest attestation of ``image``, or None."""
    img = image_row(session, image)
    query = select(Attestation).where(Attestation.image_id == img.id)
    return session.scalars(
        query.order_by(Attestation.created_at.desc(), Attestation.id.desc())
    ).first()


def stack_attestations(session: Session, stack: str, cloud: str) -> list[Attestation]:
    """Every attestation of the stack's images on ``cloud``, newest first (a promoted
    copy's is found by what its envelope names, never by the copy's tags)."""
    query = (
        select(Attestation)
        .join(Image, Attestation.image_id == Image.id)
        .where(Image.stack == stack, Image.cloud == cloud)
        .order_by(Attestation.created_at.desc(), Attestation.id.desc())
    )
    return list(session.scalars(query))


def record_revocation(
    session: Session,
    image: Image | int,
    *,
    digest: str,
    attestation: str | None,
    reason: str,
    keyid: str,
    envelope: dict[str, object],
) -> Revocation:
    """Store a signed revocation of ``image`` (``imagectl.promotion.revoke``)."""
    row = Revocation(
        image=image_row(session, image),
        digest=digest,
        attestation=attestation,
        reason=reason,
        keyid=keyid,
        envelope=envelope,
    )
    session.add(row)
    session.flush()
    return row


def revocations(session: Session, stack: str | None = None) -> list[Revocation]:
    """Every recorded revocation (of ``stack``'s images), newest first."""
    query = select(Revocation).join(Image, Revocation.image_id == Image.id)
    if stack:
        query = query.where(Image.stack == stack)
    return list(session.scalars(query.order_by(Revocation.id.desc())))


def events(
    session: Session,
    *,
    stack: str | None = None,
    cloud: str | None = None,
    image: Image | int | None = None,
    kind: str | None = None,
    limit: int | None = None,
) -> list[Event]:
    """Events, newest first; ``kind`` matches exactly or as a prefix ending in '.'."""
    query = select(Event).order_by(Event.at.desc(), Event.id.desc())
    if stack:
        query = query.where(Event.stack == stack)
    if cloud:
        query = query.where(Event.cloud == cloud)
    if image is not None:
        query = query.where(Event.image_id == (image.id if isinstance(image, Image) else image))
    if kind:
        query = query.where(
            Event.kind.startswith(kind) if kind.endswith(".") else Event.kind == kind
        )
    if limit:
        query = query.limit(limit)
    return list(session.scalars(query))


def stacks_and_clouds(session: Session) -> list[tuple[str, str]]:
    """Every (stack, cloud) pair that has an image or a pointer, sorted."""
    pairs: set[tuple[str, str]] = set()
    for query in (select(Image.stack, Image.cloud), select(Pointer.stack, Pointer.cloud)):
        pairs.update((stack, cloud) for stack, cloud in session.execute(query.distinct()))
    return sorted(pairs)
