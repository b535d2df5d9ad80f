"""One promotion run's per-region work: copy (with a recorded token) -> wait until
available -> tag -> share -> record, each region in its own thread, a failure recorded
and returned, never raised (it must not cancel the other regions)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from sqlalchemy.orm import Session

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.clouds.base import CloudImage, Provider
from imagectl.crashpoints import crash_point
from imagectl.promotion import records as rec
from imagectl.promotion.results import Progress, RegionFailed, RegionResult
from imagectl.stacks.schema import CloudCommon, Stack

MISSING_GRACE_S = 2.0  # how long an accepted copy may be invisible before it counts as lost


class RegionRun:
    """One promotion run: the shared state its region threads read and record into."""

    def __init__(
        self,
        catalog: Catalog,
        provider: Provider,
        stack: Stack,
        settings: CloudCommon,
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
        self.db_lock = threading.Lock()
        # Azure's regions are one list on one gallery image version: concurrent
        # read-modify-write updates would lose regions, so its copy requests go one at a
        # time (they only start replication; the waiting stays parallel).
        self.replicate_lock: threading.Lock | None = (
            threading.Lock() if provider.spec.replicate_serially else None
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """A catalog transaction, one region thread at a time: the threads queue here
        instead of in SQLite's busy handler, whose back-off sleeps grow to 100 ms."""
        with self.db_lock, self.catalog.transaction() as s:
            yield s

    def tell(self, region: str, step: str, detail: str = "") -> None:
        if self.progress is not None:
            self.progress(region, step, detail)

    def log(self, kind: str, region: str, message: str, **details: object) -> None:
        with self.transaction() as s:
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
                self.provider.tag_state(replica, ImageState.PROMOTING)
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
        with self.transaction() as s:
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
        with self.transaction() as s:
            source = repo.image_row(s, self.source_pk)
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


def _sharing(settings: CloudCommon) -> dict[str, object]:
    return {"share": settings.share.model_dump()}
