"""The catalog's tables as SQLAlchemy 2 typed declarative models.

- ``Build``: one Packer run of a stack on a cloud (digest, commit, manifest, outcome).
- ``Image``: one image in one cloud *region* (AMI id, GCP image name, Azure gallery
  version id or local path) with its lifecycle state (see ``lifecycle.py``).
- ``ValidationRun``: one validator receipt for an image (shape, host, verdict, and the
  receipt itself: ``body`` reads it as ``imagectl.validators.receipt.Receipt``).
- ``Promotion``: one attempt to move an image to the "latest" pointer of target regions.
- ``Pointer``: the "latest" image per stack + cloud + region, and the one before it.
- ``CanaryPointer``: the "canary" image beside it; ``RolloutDecision``: each decision
  ``imagectl rollout`` made from the fleet's health, with its evidence.
- ``Event``: the append-only log; rows are never updated or deleted (enforced below).
- ``Lock``: named locks (promotion locks on SQLite; holder details on PostgreSQL).

Times are stored in UTC and always come back timezone-aware. Schema changes need a new
Alembic revision in ``migrations/versions/`` (a test compares both).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.mutable import MutableDict, MutableList
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    relationship,
)
from sqlalchemy.types import TypeDecorator

from imagectl.catalog.lifecycle import ImageState
from imagectl.validators.receipt import Receipt, parse_receipt

# Stable constraint names: the same on SQLite and PostgreSQL, so migrations can refer to them.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite keeps no offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware UTC time")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


def _one_of(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        # Mutable wrappers: changing a dict or list in place marks the row dirty.
        dict[str, Any]: MutableDict.as_mutable(JSON()),
        dict[str, object]: MutableDict.as_mutable(JSON()),
        list[str]: MutableList.as_mutable(JSON()),
    }


class Build(Base):
    __tablename__ = "builds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    build_id: Mapped[str] = mapped_column(String(128), unique=True)
    stack: Mapped[str] = mapped_column(String(128), index=True)
    stack_digest: Mapped[str] = mapped_column(String(128))
    cloud: Mapped[str] = mapped_column(String(32))
    git_commit: Mapped[str | None] = mapped_column(String(64))
    packer_manifest: Mapped[dict[str, Any] | None]
    artifact_id: Mapped[str | None] = mapped_column(String(512))
    # sha256 of /etc/imagectl/manifest.json as the build fetched it (the attested one)
    manifest_sha256: Mapped[str | None] = mapped_column(String(64))
    # the base image the build started from (imagectl.clouds.base_image): the cloud's id
    # for it, and its record (BaseImage.to_dict()); None for builds before migration 0006
    base_image_id: Mapped[str | None] = mapped_column(String(512))
    base_image: Mapped[dict[str, Any] | None]
    # the image's expectations per validation shape as the build resolved them, and the
    # stack digest they came from (imagectl.stacks.expectations.BuildExpectations: what
    # validate-image judges the image by); None for builds before migration 0008
    expectations_digest: Mapped[str | None] = mapped_column(String(128))
    expectations: Mapped[dict[str, Any] | None]
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    # running | succeeded | failed | cancelled
    outcome: Mapped[str] = mapped_column(String(16), default="running")

    images: Mapped[list[Image]] = relationship(back_populates="build")

    def __repr__(self) -> str:
        return f"<Build {self.build_id} {self.stack}/{self.cloud} {self.outcome}>"


class Image(Base):
    __tablename__ = "images"
    __table_args__ = (
        UniqueConstraint("cloud", "region", "cloud_image_id", name="uq_images_cloud_region_id"),
        Index("ix_images_stack_cloud_state", "stack", "cloud", "state"),
        CheckConstraint(_one_of("state", [s.value for s in ImageState]), name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cloud_image_id: Mapped[str] = mapped_column(String(512))
    cloud: Mapped[str] = mapped_column(String(32))
    region: Mapped[str] = mapped_column(String(64))
    stack: Mapped[str] = mapped_column(String(128))
    stack_digest: Mapped[str] = mapped_column(String(128))
    build_pk: Mapped[int | None] = mapped_column(ForeignKey("builds.id"), index=True)
    state: Mapped[str] = mapped_column(String(32), default=ImageState.BUILT.value)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    state_changed_at: Mapped[datetime] = mapped_column(default=utcnow)
    tags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    blocked_reason: Mapped[str | None] = mapped_column(Text)

    build: Mapped[Build | None] = relationship(back_populates="images")
    validation_runs: Mapped[list[ValidationRun]] = relationship(
        back_populates="image", order_by="ValidationRun.received_at"
    )

    @property
    def label(self) -> str:
        """How messages name the image: ``<cloud id> (<cloud>/<region>, <stack>)``."""
        return f"{self.cloud_image_id} ({self.cloud}/{self.region}, stack {self.stack})"

    def __repr__(self) -> str:
        return f"<Image {self.label} {self.state}>"


class ValidationRun(Base):
    """One validator receipt for an image: a verdict on one host of one shape."""

    __tablename__ = "validation_runs"
    __table_args__ = (CheckConstraint(_one_of("verdict", ["pass", "fail"]), name="verdict"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id"), index=True)
    shape: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(255))
    profile: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(8))  # pass | fail
    worst_action: Mapped[str] = mapped_column(String(32))  # validators.results.Action
    receipt: Mapped[dict[str, object]]
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    validator_version: Mapped[str] = mapped_column(String(64))

    image: Mapped[Image] = relationship(back_populates="validation_runs")

    @property
    def where(self) -> str:
        """How messages name the receipt: ``receipt <id> (<shape> on <host>)``."""
        return f"receipt {self.id} ({self.shape} on {self.host})"

    @property
    def body(self) -> Receipt:
        """The stored receipt as the validator's model; a body that is not a valid receipt
        (edited by hand, or from a foreign writer) is bad input naming the run (exit 2)."""
        return parse_receipt(self.receipt, where=self.where)


class Promotion(Base):
    __tablename__ = "promotions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stack: Mapped[str] = mapped_column(String(128), index=True)
    cloud: Mapped[str] = mapped_column(String(32))
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id"), index=True)
    target_regions: Mapped[list[str]]
    completed_regions: Mapped[list[str]] = mapped_column(default=list)
    # running | succeeded | partial | failed
    state: Mapped[str] = mapped_column(String(16), default="running")
    from_state: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    forced: Mapped[bool] = mapped_column(Boolean, default=False)
    force_reason: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(128))
    message: Mapped[str | None] = mapped_column(Text)

    image: Mapped[Image] = relationship()


class _RegionPointer:
    """The columns of a pointer (``Pointer``'s "latest", ``CanaryPointer``'s "canary"): the
    image of a stack on a cloud in one region, and the one before it (the tables' columns
    are the same; each table names its own unique constraint)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stack: Mapped[str] = mapped_column(String(128))
    cloud: Mapped[str] = mapped_column(String(32))
    region: Mapped[str] = mapped_column(String(64))
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id"))
    previous_image_id: Mapped[int | None] = mapped_column(ForeignKey("images.id"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128))


class Pointer(_RegionPointer, Base):
    """The "latest" image of a stack on a cloud in one region, and the previous one."""

    __tablename__ = "pointers"
    __table_args__ = (
        UniqueConstraint("stack", "cloud", "region", name="uq_pointers_stack_cloud_region"),
    )

    image: Mapped[Image] = relationship(foreign_keys="Pointer.image_id")
    previous_image: Mapped[Image | None] = relationship(foreign_keys="Pointer.previous_image_id")


class PointerFlip(Base):
    """One region's move of a "latest" pointer in a promotion, recorded per region and
    cloud: ``pending`` from before the cloud call until the catalog pointer follows it,
    then ``done`` (or ``undone`` by a rollback). A flip that stopped half way shows in
    ``status``; a re-run finishes the pending regions; rollback undoes the done ones."""

    __tablename__ = "pointer_flips"
    __table_args__ = (
        UniqueConstraint("promotion_id", "region", name="uq_pointer_flips_promotion_region"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    promotion_id: Mapped[int] = mapped_column(ForeignKey("promotions.id"), index=True)
    stack: Mapped[str] = mapped_column(String(128))
    cloud: Mapped[str] = mapped_column(String(32))
    region: Mapped[str] = mapped_column(String(64))
    from_image_id: Mapped[int | None] = mapped_column(ForeignKey("images.id"))
    to_image_id: Mapped[int] = mapped_column(ForeignKey("images.id"))
    state: Mapped[str] = mapped_column(String(16), default="pending")  # pending|done|undone
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    from_image: Mapped[Image | None] = relationship(foreign_keys=[from_image_id])
    to_image: Mapped[Image] = relationship(foreign_keys=[to_image_id])


class CanaryPointer(_RegionPointer, Base):
    """The "canary" image of a stack on a cloud in one region, beside "latest":
    what the fraction of a fleet that takes a candidate first deploys from
    (``imagectl promote --canary``); ``imagectl rollout`` advances latest to it or moves it
    back to ``previous_image_id`` (none: the pointer is removed)."""

    __tablename__ = "canary_pointers"
    __table_args__ = (
        UniqueConstraint("stack", "cloud", "region", name="uq_canary_pointers_stack_cloud_region"),
    )

    image: Mapped[Image] = relationship(foreign_keys="CanaryPointer.image_id")
    previous_image: Mapped[Image | None] = relationship(
        foreign_keys="CanaryPointer.previous_image_id"
    )


class RolloutDecision(Base):
    """One ``imagectl rollout`` decision for a stack's canary: advance, hold or roll back,
    with the window, the Prometheus queries and the numbers per shape it was made on
    (``evidence``), and what was done about it."""

    __tablename__ = "rollout_decisions"
    __table_args__ = (
        CheckConstraint(_one_of("decision", ["advance", "hold", "rollback"]), name="decision"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stack: Mapped[str] = mapped_column(String(128), index=True)
    cloud: Mapped[str] = mapped_column(String(32))
    candidate_id: Mapped[int | None] = mapped_column(ForeignKey("images.id"))
    baseline_id: Mapped[int | None] = mapped_column(ForeignKey("images.id"))
    decision: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    window_s: Mapped[int] = mapped_column(Integer)
    decided_at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(String(128))
    applied: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, object]] = mapped_column(default=dict)

    candidate: Mapped[Image | None] = relationship(foreign_keys=[candidate_id])
    baseline: Mapped[Image | None] = relationship(foreign_keys=[baseline_id])


class Sbom(Base):
    """A build's CycloneDX SBOM (``imagectl.provenance.sbom``) and the inventory it was
    rendered from (what ``imagectl diff`` compares), with the packages the image holds."""

    __tablename__ = "sboms"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    build_pk: Mapped[int] = mapped_column(ForeignKey("builds.id"), unique=True)
    digest: Mapped[str] = mapped_column(String(80))  # sha256-<hex> of the document
    document: Mapped[dict[str, object]]
    inventory: Mapped[dict[str, object]]
    held: Mapped[list[str]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    build: Mapped[Build] = relationship()


class Attestation(Base):
    """A signed statement that an image passed validation (``imagectl.provenance``): the
    DSSE envelope as signed, its digest (the image's ``imagectl:attestation`` tag) and
    the signing key's id."""

    __tablename__ = "attestations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id"), index=True)
    digest: Mapped[str] = mapped_column(String(80), unique=True)  # sha256-<hex>
    keyid: Mapped[str] = mapped_column(String(128))
    envelope: Mapped[dict[str, object]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    image: Mapped[Image] = relationship()


class Revocation(Base):
    """A signed revocation of an image's attestation (``imagectl revoke``, or ``block``
    of an attested image): the DSSE envelope as signed, its digest (the image's
    ``imagectl:revoked`` tag), the attestation it revokes and why."""

    __tablename__ = "revocations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id"), index=True)
    digest: Mapped[str] = mapped_column(String(80), unique=True)  # sha256-<hex>
    attestation: Mapped[str | None] = mapped_column(String(80))  # the revoked envelope's
    reason: Mapped[str] = mapped_column(Text)
    keyid: Mapped[str] = mapped_column(String(128))
    envelope: Mapped[dict[str, object]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    image: Mapped[Image] = relationship()


class Event(Base):
    """Append-only log of everything that happened to stacks and images."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_stack_cloud_at", "stack", "cloud", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(String(128))
    stack: Mapped[str | None] = mapped_column(String(128))
    cloud: Mapped[str | None] = mapped_column(String(32))
    image_id: Mapped[int | None] = mapped_column(ForeignKey("images.id"), index=True)
    kind: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)

    image: Mapped[Image | None] = relationship()


class Lock(Base):
    """A named lock and who holds it (see ``locks.py``)."""

    __tablename__ = "locks"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    token: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(128))
    pid: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(255))
    acquired_at: Mapped[datetime] = mapped_column(default=utcnow)


class AppendOnlyViolation(RuntimeError):
    """Code tried to change or delete an event: the log is append-only."""


@event.listens_for(Session, "before_flush")
def _events_are_append_only(session: Session, flush_context: Any, instances: Any) -> None:
    for obj in (*session.dirty, *session.deleted):
        if isinstance(obj, Event) and (obj in session.deleted or session.is_modified(obj)):
            raise AppendOnlyViolation(f"event {obj.id} is append-only: it cannot be changed")
