"""``promote()``: the gated, parallel, resumable promotion of one image.

Sequence (each step recorded before/after its side effect, see ``records.py``):

1. Take the stack's promotion lock (``catalog.locks.promotion_lock``): a second promotion
   of the same stack and cloud waits ``lock_wait_s`` then fails with exit 1.
2. Gate (``gate.py``) unless resuming; ``force`` with a ``reason`` overrides it and writes
   a ``promotion.forced`` event naming who, why and which rules were overridden.
3. Every target region in parallel (one thread each; one failure never cancels the
   others): copy with an idempotency token -> wait until available -> record the replica
   in the catalog -> tag -> share with the stack's ``share`` settings.
4. Only when every target region succeeded: flip the "latest" pointer of every region
   (cloud first, then the catalog, which keeps the previous one), tag the replicas
   ``promoted`` and close the promotion: the image and its replicas become ``promoted``.
   Otherwise the promotion closes ``partial``: the image is ``partially_promoted``, no
   pointer moved, and ``PromotionResult.resume_command`` says how to finish.
5. Retention (``retention.py``): promoted images beyond ``retention.keep_last`` are
   deprecated unless a pointer or a running instance still uses them.

A killed run leaves the image ``promoting`` with an open promotion (or
``partially_promoted``); running ``promote`` again resumes it without copying twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from imagectl.clouds.base import CloudImage, Provider
from imagectl.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, CloudError, UserError
from imagectl.promotion import records as rec
from imagectl.promotion.crash import crash_point
from imagectl.promotion.gate import GateRefused, ImageBlocked, check_gate

Progress = Callable[[str, str, str], None]  # (region, step, detail)
DEFAULT_TIMEOUT_S = 3600.0
MISSING_GRACE_S = 2.0  # how long an accepted copy may be invisible before it counts as lost


@dataclass
class RegionResult:
    region: str
    state: str  # done | failed
    replica_id: str | None = None
    error: str | None = None
    seconds: float = 0.0
    resumed: bool = False


@dataclass
class PromotionResult:
    stack: str
    cloud: str
    image_id: str  # the cloud id of the promoted (source) image
    image_pk: int
    state: str  # promoted | partially_promoted | failed | already_promoted | dry_run
    promotion_id: int | None = None
    regions: dict[str, RegionResult] = field(default_factory=dict)
    pointer_flipped: bool = False
    previous_pointers: dict[str, str | None] = field(default_factory=dict)
    forced: bool = False
    overridden: list[str] = field(default_factory=list)
    deprecated: list[str] = field(default_factory=list)
    retention_skipped: list[str] = field(default_factory=list)
    resume_command: str | None = None
    resumed: bool = False
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.state in ("promoted", "already_promoted", "dry_run"):
            return EXIT_OK
        return EXIT_FAILED

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


class RegionFailed(Exception):
    def __init__(self, step: str, message: str, *, new_token: bool = False):
        self.step = step
        self.new_token = new_token
        super().__init__(message)


def _stack_parts(stack: Any) -> tuple[Any, str]:
    """(Stack model, digest) from a ResolvedStack or a Stack."""
    if hasattr(stack, "digest") and hasattr(stack, "stack"):
        return stack.stack, stack.digest
    from imagectl.stacks import stack_digest

    return stack, stack_digest(stack)


def cloud_settings(stack: Any, cloud: str) -> Any:
    settings = getattr(stack.clouds, cloud, None)
    if settings is None:
        raise UserError(
            f"stack {stack.name} has no '{cloud}' cloud",
            hint=f"Use one of: {', '.join(stack.clouds.enabled())}",
        )
    return settings


def target_regions(stack: Any, cloud: str, regions: list[str] | None) -> list[str]:
    allowed = list(cloud_settings(stack, cloud).regions)
    if not regions:
        return allowed
    unknown = [r for r in regions if r not in allowed]
    if unknown:
        raise UserError(
            f"region(s) {', '.join(unknown)} are not targets of stack {stack.name} on {cloud}",
            hint=f"The stack's {cloud} regions are: {', '.join(allowed)}",
        )
    return list(dict.fromkeys(regions))


def resume_command(image: Any, cloud: str, regions: list[str], all_regions: list[str]) -> str:
    cmd = f"imagectl promote {image.cloud_image_id} --stack {image.stack} --cloud {cloud}"
    if sorted(regions) != sorted(all_regions):
        cmd += f" --regions {','.join(regions)}"
    return cmd


def group_rows(session: Any, source: Any) -> list[Any]:
    """The source image row and every replica row copied from it (all regions)."""
    from imagectl.catalog import repository as repo

    rows = repo.list_images(session, stack=source.stack, cloud=source.cloud)
    return [r for r in rows if r.id == source.id or r.tags.get(rec.TAG_SOURCE) == source.id]


def _open_promotion(session: Any, image: Any) -> Any:
    from imagectl.catalog.models import Promotion
    from sqlalchemy import select

    query = (
        select(Promotion)
        .where(Promotion.image_id == image.id, Promotion.state == "running")
        .order_by(Promotion.id.desc())
    )
    return session.scalars(query).first()


def _last_promotion(session: Any, image: Any) -> Any:
    from imagectl.catalog.models import Promotion
    from sqlalchemy import select

    query = select(Promotion).where(Promotion.image_id == image.id).order_by(Promotion.id.desc())
    return session.scalars(query).first()


class _Run:
    """One promotion run: the shared state its region threads read and record into."""

    def __init__(
        self,
        catalog: Any,
        provider: Provider,
        stack: Any,
        settings: Any,
        source_pk: int,
        source: CloudImage,
        promotion_id: int,
        progress: Progress | None,
        poll_s: float,
        timeout_s: float,
        actor: str | None,
    ):
        self.catalog = catalog
        self.provider = provider
        self.stack = stack
        self.settings = settings
        self.source_pk = source_pk
        self.source = source
        self.promotion_id = promotion_id
        self.progress = progress
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.actor = actor
        # Azure's regions are one list on one gallery image version: concurrent
        # read-modify-write updates would lose regions, so its copy requests go one at a
        # time (they only start replication; the waiting stays parallel).
        self.replicate_lock: threading.Lock | None = (
            threading.Lock()
            if getattr(provider, "replicate_serially", provider.cloud == "azure")
            else None
        )

    def tell(self, region: str, step: str, detail: str = "") -> None:
        if self.progress is not None:
            self.progress(region, step, detail)

    def log(self, kind: str, region: str, message: str, **details: Any) -> None:
        from imagectl.catalog import repository as repo

        with self.catalog.transaction() as s:
            img = repo.get_image(s, self.source_pk)
            repo.log_event(
                s,
                kind,
                f"{region}: {message}",
                image=img,
                actor=self.actor,
                details={"promotion": self.promotion_id, "region": region, **details},
            )

    # -- one region -----------------------------------------------------------------
    def region(self, p: rec.RegionProgress) -> RegionResult:
        region = p.region
        started = time.monotonic()
        if p.done:
            self.tell(region, "done", "already done in an earlier run")
            return RegionResult(region, "done", p.replica_id, resumed=True)
        step = "copy"
        try:
            replica_id = self._copy(p)
            step = "wait"
            replica = self._wait(p, replica_id)
            step = "tag"
            if not p.tagged:
                self.tell(region, "tagging")
                self.provider.tag_state(replica, "promoting")
            step = "share"
            if not p.shared:
                self.tell(region, "sharing")
                self.provider.share(replica, self.settings.share)
            step = "record"
            seconds = time.monotonic() - started
            self._record_done(region, replica, seconds)
            self.tell(region, "done", f"{replica.image_id} in {seconds:.1f} s")
            crash_point("after_region_done")
            return RegionResult(region, "done", replica.image_id, seconds=seconds)
        except Exception as error:  # one region's failure never stops the others
            new_token = isinstance(error, RegionFailed) and error.new_token
            where = error.step if isinstance(error, RegionFailed) else step
            message = str(error) or type(error).__name__
            self.log(
                rec.FAILED,
                region,
                f"failed at {where}: {message}",
                error=message,
                step=where,
                new_token=new_token,
            )
            self.tell(region, "failed", message)
            return RegionResult(
                region, "failed", p.replica_id, error=message, seconds=time.monotonic() - started
            )

    def _copy(self, p: rec.RegionProgress) -> str:
        region = p.region
        if p.replica_id:
            self.tell(region, "copying", f"resuming copy {p.replica_id}")
            return p.replica_id
        if region == self.source.region:
            self.log(
                rec.COPY_STARTED,
                region,
                "source region: no copy needed",
                replica_id=self.source.image_id,
                token=None,
            )
            return self.source.image_id
        token = p.token
        if token is None:  # requested (and recorded) in bulk by request_copies()
            raise RegionFailed("copy", f"no copy token recorded for {region}")
        self.tell(region, "copying", f"token {token[:18]}")
        if self.replicate_lock is not None:
            with self.replicate_lock:
                status = self.provider.replicate(self.source, region, token=token)
        else:
            status = self.provider.replicate(self.source, region, token=token)
        crash_point("after_copy_call")
        if status.state == "failed" or not status.image_id:
            raise RegionFailed(
                "copy",
                status.detail or f"copy into {region} refused",
                new_token=status.state == "failed",
            )
        self.log(
            rec.COPY_STARTED,
            region,
            f"copy {status.image_id} started ({status.state})",
            replica_id=status.image_id,
            token=token,
        )
        crash_point("after_copy_started")
        return status.image_id

    def _wait(self, p: rec.RegionProgress, replica_id: str) -> CloudImage:
        region = p.region
        deadline = time.monotonic() + self.timeout_s
        missing_since: float | None = None
        while True:
            status = self.provider.replica_status(self.source, region)
            if status.state == "available":
                break
            if status.state == "failed":
                raise RegionFailed("wait", status.detail or "the copy failed", new_token=True)
            if status.state == "missing":  # an accepted copy can take a moment to show
                missing_since = missing_since or time.monotonic()
                if time.monotonic() - missing_since > max(MISSING_GRACE_S, 5 * self.poll_s):
                    raise RegionFailed("wait", "the copy disappeared", new_token=True)
            else:
                missing_since = None
            if time.monotonic() > deadline:
                raise RegionFailed("wait", f"copy still {status.state} after {self.timeout_s:g} s")
            self.tell(region, "waiting", status.state)
            time.sleep(self.poll_s)
        replica = self.provider.get_image(status.image_id or replica_id, region)
        if replica is None:
            raise RegionFailed(
                "wait", f"copy {replica_id} is available but cannot be read", new_token=True
            )
        return replica

    def request_copies(self, progress: dict[str, rec.RegionProgress]) -> None:
        """Record the copy token of every region that needs a copy, in one transaction,
        before any copy is asked for (a re-run reuses these tokens)."""
        from imagectl.catalog import repository as repo

        todo = [
            p
            for p in progress.values()
            if not p.done
            and p.replica_id is None
            and p.token is None
            and p.region != self.source.region
        ]
        if not todo:
            return
        with self.catalog.transaction() as s:
            img = repo.get_image(s, self.source_pk)
            for p in todo:
                p.token = rec.copy_token(
                    self.source_pk, self.source.image_id, p.region, self.promotion_id, p.attempts
                )
                repo.log_event(
                    s,
                    rec.COPY_REQUESTED,
                    f"{p.region}: copy of {self.source.image_id} requested",
                    image=img,
                    actor=self.actor,
                    details={"promotion": self.promotion_id, "region": p.region, "token": p.token},
                )
        for _p in todo:
            crash_point("after_copy_requested")

    def _record_done(self, region: str, replica: CloudImage, seconds: float) -> None:
        """One transaction: the replica's catalog row (state promoting) and the region's
        ``done`` event (available, tagged, shared). Tagging and sharing are idempotent, so
        a run killed before this commit simply does them again. The row's region is the
        target region (an Azure version or a GCP image reports its home location)."""
        from imagectl.catalog import repository as repo
        from imagectl.catalog.lifecycle import ImageState

        with self.catalog.transaction() as s:
            source = repo.get_image(s, self.source_pk)
            assert source is not None
            row = repo.find_image(s, source.cloud, region, replica.image_id)
            if row is None:
                row = repo.record_image(
                    s,
                    cloud_image_id=replica.image_id,
                    region=region,
                    build=source.build,
                    cloud=source.cloud,
                    stack=source.stack,
                    stack_digest=source.stack_digest,
                    state=ImageState.PROMOTING,
                    tags={rec.TAG_SOURCE: source.id, "promotion": self.promotion_id},
                    actor=self.actor,
                )
            repo.log_event(
                s,
                rec.DONE,
                f"{region}: replica {replica.image_id} available, tagged and shared "
                f"in {seconds:.1f} s",
                image=source,
                actor=self.actor,
                details={
                    "promotion": self.promotion_id,
                    "region": region,
                    "replica_id": replica.image_id,
                    "replica_pk": row.id,
                    "seconds": round(seconds, 3),
                    **_sharing(self.settings),
                },
            )


def _sharing(settings: Any) -> dict[str, Any]:
    share = settings.share
    return {"share": share.model_dump() if hasattr(share, "model_dump") else {}}


def promote(
    catalog: Any,
    provider: Provider,
    stack: Any,
    image: Any,
    *,
    regions: list[str] | None = None,
    force: bool = False,
    reason: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    lock_wait_s: float = 0.0,
    poll_s: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retention: bool = True,
    actor: str | None = None,
) -> PromotionResult:
    """Promote ``image`` (catalog id, ``Image`` row or cloud image id) of ``stack``
    (``ResolvedStack`` or ``Stack``) through ``provider``; see the module docstring.

    Raises ``GateRefused`` / ``ImageBlocked`` (exit 1), ``PromotionLocked`` (exit 1) or
    ``UserError`` (exit 2); otherwise returns a ``PromotionResult`` whose ``state`` is
    promoted, partially_promoted, failed, already_promoted or dry_run.
    """
    from imagectl.catalog import repository as repo
    from imagectl.catalog.lifecycle import ImageState, current_actor
    from imagectl.catalog.locks import promotion_lock

    model, digest = _stack_parts(stack)
    cloud = provider.cloud
    settings = cloud_settings(model, cloud)
    targets = target_regions(model, cloud, regions)
    actor = actor or current_actor()
    if force and not (reason or "").strip():
        raise UserError("--force needs --reason '...': a forced promotion records who and why")
    poll = poll_s if poll_s is not None else float(getattr(provider, "poll_interval_s", 2.0))
    started = time.monotonic()

    with catalog.transaction() as s:
        img = resolve_image(s, image, stack=model.name, cloud=cloud)
        pk = img.id
    if dry_run:
        return _dry_run(catalog, pk, model, cloud, digest, targets, force)

    with promotion_lock(catalog, model.name, cloud, wait_s=lock_wait_s):
        with catalog.transaction() as s:
            img = repo.get_image(s, pk)
            assert img is not None
            result = PromotionResult(model.name, cloud, img.cloud_image_id, img.id, "failed")
            refusal: GateRefused | None = None
            if img.state == ImageState.PROMOTED.value:
                result.state = "already_promoted"
                result.promotion_id = getattr(_last_promotion(s, img), "id", None)
            else:
                promo = _begin(s, img, model, digest, targets, force, reason, actor, result)
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
        source = provider.get_image(result.image_id, _region_of(catalog, pk))
        if source is None:
            raise CloudError(
                f"image {result.image_id} is not in {cloud} any more",
                hint="Check the cloud console; the catalog and the cloud disagree",
            )
        run = _Run(
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
        run.request_copies(folded)
        with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
            outcomes = list(pool.map(run.region, [folded[r] for r in targets]))
        result.regions = {o.region: o for o in outcomes}
        failed = [o.region for o in outcomes if o.state != "done"]
        if failed:
            _close_partial(catalog, run, result, targets, failed)
        else:
            _flip_and_close(catalog, run, result, targets)
            _finish_retention(catalog, provider, model, cloud, actor, progress, result, retention)
    result.seconds = time.monotonic() - started
    return result


def _region_of(catalog: Any, pk: int) -> str:
    from imagectl.catalog import repository as repo

    with catalog.transaction() as s:
        img = repo.get_image(s, pk)
        assert img is not None
        return img.region


def resolve_image(
    session: Any, ref: Any, *, stack: str | None = None, cloud: str | None = None
) -> Any:
    """The catalog ``Image`` for a catalog id, an ``Image`` or a cloud image id.

    A cloud id present in several regions (GCP, local) resolves to the source image, not
    to its replicas. Unknown or ambiguous references are bad input (exit 2).
    """
    from imagectl.catalog import repository as repo
    from imagectl.catalog.models import Image

    if isinstance(ref, Image):
        found = repo.get_image(session, ref.id)
    elif isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        found = repo.get_image(session, int(ref))
    else:
        rows = [
            r
            for r in repo.list_images(session, stack=stack, cloud=cloud)
            if r.cloud_image_id == ref
        ]
        sources = [r for r in rows if rec.TAG_SOURCE not in r.tags] or rows
        if len(sources) > 1:
            where = ", ".join(f"{r.id} ({r.cloud}/{r.region})" for r in sources)
            raise UserError(
                f"image {ref} is ambiguous: catalog ids {where}",
                hint="Pass the catalog id instead, or --stack and --cloud",
            )
        found = sources[0] if sources else None
    if found is None:
        scope = " ".join(
            x for x in (f"stack {stack}" if stack else "", f"cloud {cloud}" if cloud else "") if x
        )
        raise UserError(
            f"unknown image '{ref}'{' in ' + scope if scope else ''}",
            hint="Run `imagectl status` to list images and their catalog ids",
        )
    if stack and found.stack != stack:
        raise UserError(f"image {found.label} belongs to stack {found.stack}, not {stack}")
    if cloud and found.cloud != cloud:
        raise UserError(f"image {found.label} is on cloud {found.cloud}, not {cloud}")
    if rec.TAG_SOURCE in found.tags:
        raise UserError(
            f"image {found.label} is a replica of image {found.tags[rec.TAG_SOURCE]}",
            hint="Promote, roll back or block the source image",
        )
    return found


def _begin(
    s: Any,
    img: Any,
    model: Any,
    digest: str,
    targets: list[str],
    force: bool,
    reason: str | None,
    actor: str,
    result: PromotionResult,
) -> Any:
    """Open (or reopen) the promotion row, after the gate for a fresh one."""
    from imagectl.catalog import repository as repo
    from imagectl.catalog.lifecycle import ImageState

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
    reasons = check_gate(
        s, img, stack_digest=digest, max_age_hours=model.validation.max_receipt_age_hours
    )
    repo.log_event(
        s,
        "promotion.gate",
        f"gate for {img.label}: " + ("passed" if not reasons else "; ".join(reasons)),
        image=img,
        actor=actor,
        details={"passed": not reasons, "reasons": reasons, "forced": force},
    )
    if reasons and not force:
        cls = ImageBlocked if img.state == ImageState.BLOCKED.value else GateRefused
        return cls(img.label, reasons)
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


def _dry_run(
    catalog: Any, pk: int, model: Any, cloud: str, digest: str, targets: list[str], force: bool
) -> PromotionResult:
    from imagectl.catalog import repository as repo

    with catalog.transaction() as s:
        img = repo.get_image(s, pk)
        assert img is not None
        result = PromotionResult(model.name, cloud, img.cloud_image_id, img.id, "dry_run")
        if img.state in ("validated", "blocked"):
            reasons = check_gate(
                s, img, stack_digest=digest, max_age_hours=model.validation.max_receipt_age_hours
            )
            if reasons and not force:
                cls = ImageBlocked if img.state == "blocked" else GateRefused
                raise cls(img.label, reasons)
            result.overridden, result.forced = reasons, force
        for region in targets:
            ptr = repo.get_pointer(s, model.name, cloud, region)
            result.previous_pointers[region] = ptr.image.cloud_image_id if ptr else None
            result.regions[region] = RegionResult(region, "planned")
    return result


def _set_group_state(s: Any, source: Any, target: Any, reason: str, actor: str) -> None:
    from imagectl.catalog import repository as repo

    for row in group_rows(s, source):
        if row.id != source.id and row.state == "promoting":
            repo.set_state(s, row, target, reason=reason, actor=actor)


def _close_partial(
    catalog: Any, run: _Run, result: PromotionResult, targets: list[str], failed: list[str]
) -> None:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.lifecycle import ImageState
    from imagectl.catalog.models import Promotion

    done = [r for r in targets if r not in failed]
    errors = "; ".join(f"{r}: {result.regions[r].error}" for r in failed)
    with catalog.transaction() as s:
        promo = s.get(Promotion, run.promotion_id)
        repo.finish_promotion(
            s,
            promo,
            completed_regions=done,
            actor=run.actor,
            message=f"pointer unchanged; failed {errors}",
        )
        img = repo.get_image(s, run.source_pk)
        assert img is not None
        target = ImageState.PARTIALLY_PROMOTED if done else ImageState.VALIDATED
        if done:
            _set_group_state(s, img, target, f"promotion {promo.id} partial", run.actor or "")
        result.state = img.state if img.state == "partially_promoted" else "failed"
        result.resume_command = resume_command(img, result.cloud, targets, targets)
        repo.log_event(
            s,
            "promotion.finished",
            f"promotion {promo.id} of {img.label}: {result.state}; pointer unchanged; "
            f"resume with: {result.resume_command}",
            image=img,
            actor=run.actor,
            details={
                "promotion": promo.id,
                "state": result.state,
                "done": done,
                "failed": failed,
                "resume": result.resume_command,
            },
        )


def _flip_and_close(catalog: Any, run: _Run, result: PromotionResult, targets: list[str]) -> None:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.lifecycle import ImageState
    from imagectl.catalog.models import Promotion

    stack, cloud = run.stack.name, result.cloud
    crash_point("before_pointer_flip")
    with catalog.transaction() as s:
        img = repo.get_image(s, run.source_pk)
        flips = repo.events(s, image=run.source_pk, kind=rec.FLIP_STARTED)
        previous = {}
        for region in targets:
            ptr = repo.get_pointer(s, stack, cloud, region)
            previous[region] = ptr.image.cloud_image_id if ptr else None
        if flips:
            previous = dict(flips[-1].details.get("previous", previous))
        else:
            repo.log_event(
                s,
                rec.FLIP_STARTED,
                f"flipping latest of {stack} in "
                f"{', '.join(targets)} to {img.cloud_image_id if img else '?'}",
                image=img,
                actor=run.actor,
                details={"promotion": run.promotion_id, "previous": previous},
            )
    result.previous_pointers = previous
    replicas = {r: result.regions[r].replica_id or "" for r in targets}
    with catalog.transaction() as s:
        todo = []
        for region in targets:
            row = repo.find_image(s, cloud, region, replicas[region])
            if row is None:
                raise CloudError(f"replica {replicas[region]} in {region} is not in the catalog")
            ptr = repo.get_pointer(s, stack, cloud, region)
            if ptr is None or ptr.image_id != row.id:  # else flipped by an interrupted run
                todo.append(region)

    def flip(region: str) -> None:
        run.tell(region, "pointer", f"latest -> {replicas[region]}")
        run.provider.set_pointer(stack, region, replicas[region])
        crash_point("after_pointer_set")

    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        list(pool.map(flip, todo))  # a failure propagates: the promotion stays open
    with catalog.transaction() as s:
        for region in todo:
            row = repo.find_image(s, cloud, region, replicas[region])
            repo.set_pointer(
                s,
                stack,
                cloud,
                region,
                row,
                actor=run.actor,
                reason=f"promotion {run.promotion_id}",
            )
        img = repo.get_image(s, run.source_pk)
        if not repo.events(s, image=run.source_pk, kind=rec.FLIPPED):
            repo.log_event(
                s,
                rec.FLIPPED,
                f"latest of {stack} on {cloud} is {result.image_id} in {', '.join(targets)}",
                image=img,
                actor=run.actor,
                details={"promotion": run.promotion_id, "regions": targets, "previous": previous},
            )
    result.pointer_flipped = True

    def tag(region: str) -> None:
        replica = run.provider.get_image(replicas[region], region)
        if replica is not None:
            run.provider.tag_state(replica, "promoted")

    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        list(pool.map(tag, targets))
    crash_point("before_finish")
    with catalog.transaction() as s:
        promo = s.get(Promotion, run.promotion_id)
        repo.finish_promotion(
            s,
            promo,
            completed_regions=targets,
            actor=run.actor,
            message="every region replicated; pointers flipped",
        )
        img = repo.get_image(s, run.source_pk)
        _set_group_state(
            s, img, ImageState.PROMOTED, f"promotion {promo.id} succeeded", run.actor or ""
        )
        result.state = img.state if img else "promoted"
        repo.log_event(
            s,
            "promotion.finished",
            f"promotion {promo.id} of {result.image_id}: promoted to {', '.join(targets)}",
            image=img,
            actor=run.actor,
            details={"promotion": promo.id, "state": result.state, "done": targets},
        )


def _finish_retention(
    catalog: Any,
    provider: Provider,
    model: Any,
    cloud: str,
    actor: str,
    progress: Progress | None,
    result: PromotionResult,
    enabled: bool,
) -> None:
    if not enabled:
        return
    from imagectl.promotion.retention import apply_retention

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
