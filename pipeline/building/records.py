"""The records around ``imagectl build``: the endpoint override, the catalog records and the
``imagectl:state=built`` tag, and ``BuiltImage``: an image a build made, as the catalog
records it (what building returns, and what validation reads back).

``start`` records the build (outcome running) before Packer runs, with the image's
expectations on each validation shape of its cloud (``BuildExpectations``, resolved once,
here: what ``imagectl validate-image`` judges the image by); ``finish`` records the
outcome and, on success, one catalog image per artifact (state ``built``) and tags each
artifact in its cloud, so ``find_images(state="built")`` finds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog, open_catalog
from imagectl.catalog.lifecycle import ImageState
from imagectl.catalog.models import Build, Image
from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.options import provider_options
from imagectl.clouds.registry import get_provider
from imagectl.clouds.spec import CloudSpec
from imagectl.packer.manifest import Artifact
from imagectl.stacks.expectations import BuildExpectations
from imagectl.stacks.resolve import ResolvedStack
from imagectl.stacks.schema import CloudCommon


@dataclass(frozen=True)
class BuiltImage:
    """An image a build made, as the catalog records it: where it is, its state, the stack
    and digest it was built from, and the expectations its build recorded (``None``: built
    before builds recorded them, or no build of it in this catalog)."""

    cloud: str
    image_id: str
    region: str
    state: ImageState
    stack: str
    stack_digest: str
    build_id: str | None
    expectations: BuildExpectations | None

    @classmethod
    def of_row(cls, row: Image) -> BuiltImage:
        """The catalog's row (and its build's), read once: a build's expectations that do
        not parse are bad input naming the build (exit 2)."""
        build = row.build
        record = (
            BuildExpectations.from_columns(
                build.expectations_digest, build.expectations,
                where=f"catalog build {build.build_id}",
            )
            if build is not None
            else None
        )  # fmt: skip
        return cls(
            cloud=row.cloud,
            image_id=row.cloud_image_id,
            region=row.region,
            state=ImageState(row.state),
            stack=row.stack,
            stack_digest=row.stack_digest,
            build_id=build.build_id if build is not None else None,
            expectations=record,
        )

    def to_dict(self) -> dict[str, str]:
        """``imagectl build --json``'s entry of the image."""
        return {"image_id": self.image_id, "region": self.region, "state": self.state.value}


def endpoint_overrides(spec: CloudSpec[CloudCommon], overrides: dict[str, str]) -> dict[str, str]:
    """The caller's Packer overrides, plus the cloud's emulator endpoint when its
    variable is set (``CloudSpec.endpoint_packer_vars``): Packer talks to it too."""
    return {**spec.endpoint_packer_vars(), **overrides}


def prepare(resolved: ResolvedStack, spec: CloudSpec[CloudCommon]) -> None:
    """The cloud's resources a build publishes into, made or checked before Packer runs
    (``Provider.prepare_build``)."""
    get_provider(spec, provider_options(resolved, spec)).prepare_build()


@dataclass(frozen=True)
class BuildRecord:
    """The catalog a build is recorded in, and its row (``start`` to ``finish``)."""

    catalog: Catalog
    build: Build


def start(
    resolved: ResolvedStack,
    spec: CloudSpec[CloudCommon],
    build_id: str,
    git_commit: str,
    expectations: BuildExpectations,
    base_image: BaseImage | None = None,
) -> BuildRecord:
    """The build recorded as running, with the base image it starts from and the image's
    expectations."""
    catalog = open_catalog()
    with catalog.transaction() as s:
        build = repo.record_build(
            s, build_id=build_id, stack=resolved.name, stack_digest=resolved.digest,
            cloud=spec.name, git_commit=git_commit,
            base_image=base_image.to_dict() if base_image else None,
        )  # fmt: skip
        build.expectations_digest, build.expectations = expectations.columns()
    return BuildRecord(catalog, build)


def adopt(
    resolved: ResolvedStack,
    spec: CloudSpec[CloudCommon],
    build_id: str,
    expectations: BuildExpectations,
) -> BuildRecord:
    """The record of an earlier build whose artifact is used again (a reused local
    candidate, of the same inputs): found by its id, or recorded as succeeded when the
    catalog lost it; a build recorded before builds recorded expectations gets them now
    (the inputs, the stack digest among them, are the same)."""
    catalog = open_catalog()
    with catalog.transaction() as s:
        build = repo.find_build(s, build_id)
        if build is None:
            build = repo.record_build(
                s, build_id=build_id, stack=resolved.name, stack_digest=resolved.digest,
                cloud=spec.name,
            )  # fmt: skip
            repo.finish_build(s, build, outcome="succeeded")
        if build.expectations_digest is None and build.stack_digest == expectations.stack_digest:
            build.expectations_digest, build.expectations = expectations.columns()
    return BuildRecord(catalog, build)


def failed(record: BuildRecord, *, cancelled: bool) -> None:
    with record.catalog.transaction() as s:
        # by id: the row of ``start`` is detached, and a change to it alone is never flushed
        repo.finish_build(s, record.build.id, outcome="cancelled" if cancelled else "failed")


def finish(
    record: BuildRecord,
    resolved: ResolvedStack,
    spec: CloudSpec[CloudCommon],
    artifacts: list[Artifact],
) -> list[BuiltImage]:
    """The build recorded as succeeded, one catalog image per artifact (a reused one keeps
    its row and state), each new one tagged ``built`` in its cloud."""
    catalog, build = record.catalog, record.build
    images = []
    built = []
    with catalog.transaction() as s:
        if build.outcome != "succeeded":
            repo.finish_build(
                s, build, outcome="succeeded", artifact_id=",".join(a.id for a in artifacts)
            )
        for a in artifacts:
            # the same artifact again (a reused local candidate, content-addressed) keeps
            # its row and the state it reached
            row = repo.find_image(s, spec.name, a.location, a.id)
            if row is None:
                row = repo.record_image(
                    s, build=build, cloud_image_id=a.id, region=a.location, tags=a.tags
                )
                built.append(a)
            images.append(BuiltImage.of_row(row))
    provider = get_provider(spec, provider_options(resolved, spec))
    for a in built:
        image = provider.get_image(a.id, a.location)
        if image is not None:
            provider.tag_state(image, ImageState.BUILT)
    return images
