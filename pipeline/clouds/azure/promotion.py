"""Azure promotion primitives: gallery version target regions, gallery sharing,
exclude_from_latest as pointer, end-of-life, deletion.

The provider's promotion half: a mixin the provider class inherits (its clients, options
and image readers are the provider's own, declared below for the type checker), so the
provider's promotion methods are these, with no forwarding layer.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import TYPE_CHECKING, Any

from imagectl.clouds.azure.errors import is_not_found
from imagectl.clouds.azure.resources import REPLICATION, version_key
from imagectl.clouds.base import CloudImage, ReplicaStatus
from imagectl.clouds.common import iso, utcnow
from imagectl.core.errors import CloudError, UserError
from imagectl.stacks.schema import Sharing
from imagectl.tags import TAG_CANARY, TAG_DEPRECATED_AT, TAG_REPLACEMENT, TAG_STATE

# a gallery version in one of these states was validated: sharing may expose it
SHAREABLE_STATES = frozenset(
    {"validated", "promoting", "partially_promoted", "promoted", "rolled_back", "deprecated"}
)

BUSY = frozenset({"Creating", "Updating", "Deleting"})

if TYPE_CHECKING:
    from azure.core.polling import LROPoller
    from azure.mgmt.compute.models import GalleryImageVersion, TargetRegion
    from azure.mgmt.compute.operations import GalleryImageVersionsOperations

    from imagectl.clouds.azure.clients import AzureClients


class AzurePromotion:
    if TYPE_CHECKING:  # the provider's members these methods use
        clients: AzureClients
        poll_interval_s: float
        regions: list[str]
        replica_count: int
        storage_account_type: str
        write_timeout_s: float

        @property
        def versions(self) -> GalleryImageVersionsOperations: ...
        def _get_raw(
            self, image_id: str, expand: str | None = None
        ) -> GalleryImageVersion | None: ...
        def _list_raw(self) -> list[GalleryImageVersion]: ...
        def _parts(self, image_id: str) -> tuple[str, str, str, str]: ...
        def _update(self, image_id: str, **changes: Any) -> GalleryImageVersion: ...

    def _init_promotion(self) -> None:
        """The promotion's own state; the provider's __init__ calls it."""
        # ARM takes one write at a time on a gallery version: region threads queue here
        self.write_lock = threading.RLock()

    @staticmethod
    def _target_regions(raw: GalleryImageVersion) -> list[str]:
        profile = raw.publishing_profile
        regions = [t.name for t in (profile.target_regions or [])] if profile else []
        return regions or [raw.location]

    @staticmethod
    def _same_region(a: str, b: str) -> bool:
        return a.replace(" ", "").lower() == b.replace(" ", "").lower()

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        """Add ``region`` (and every other target region of the stack not listed yet:
        one write instead of one per region) to the version's target regions.

        Idempotent: a region already listed is left to replicate. One whose replication
        failed is a new attempt (the resume after a failure): Azure does not retry a
        failed region by itself, so it is dropped from the target regions (awaited) and
        added again. Every write waits until the version is no longer ``Updating``:
        ARM refuses a second write while one is in progress, and a version stays
        ``Updating`` while any region replicates.
        """
        with self.write_lock:
            return self._replicate(image, region)

    def _replicate(self, image: CloudImage, region: str) -> ReplicaStatus:
        raw = self.wait_writable(image.image_id)
        current = list(raw.publishing_profile.target_regions or [])
        listed = any(self._same_region(t.name, region) for t in current)
        home = self._same_region(raw.location or "", region)  # never drop the source region
        if listed and not home and self._replication_state(raw, region) == "failed":
            current = [t for t in current if not self._same_region(t.name, region)]
            self._set_targets(image, raw, current).result()
            raw = self.wait_writable(image.image_id)
            listed = False
        # every listed region (the home region Packer published first among them) holds
        # the stack's replica count, like every region this promotion adds
        resized = [t for t in current if t.regional_replica_count != self.replica_count]
        for t in resized:
            t.regional_replica_count = self.replica_count
        if resized and listed:
            self._set_targets(image, raw, current)  # started, not awaited
            return self.replica_status(image, region)
        if not listed:
            from azure.mgmt.compute.models import TargetRegion

            wanted = [region] + [r for r in self.regions if not self._same_region(r, region)]
            for name in wanted:
                if any(self._same_region(t.name, name) for t in current):
                    continue
                if name != region and self._replication_state(raw, name) == "failed":
                    continue
                current.append(
                    TargetRegion(
                        name=name,
                        regional_replica_count=self.replica_count,
                        storage_account_type=self.storage_account_type,
                    )
                )
            # Started, not awaited: replication takes minutes to hours per region.
            self._set_targets(image, raw, current)
        return self.replica_status(image, region)

    def wait_writable(self, image_id: str) -> GalleryImageVersion:
        """The version, once no write or replication is in progress on it."""
        deadline = time.monotonic() + self.write_timeout_s
        while True:
            raw = self._get_raw(image_id, expand="ReplicationStatus")
            if raw is None:
                raise UserError(f"gallery image version {image_id} does not exist")
            if raw.provisioning_state not in BUSY:
                return raw
            if time.monotonic() >= deadline:
                raise CloudError(
                    f"gallery image version {image_id} is still {raw.provisioning_state} "
                    f"after {self.write_timeout_s:g} s",
                    hint="Replication is still running; run the same command again later",
                )
            time.sleep(self.poll_interval_s)

    def _set_targets(
        self, image: CloudImage, raw: GalleryImageVersion, targets: list[TargetRegion]
    ) -> LROPoller[GalleryImageVersion]:
        from azure.mgmt.compute.models import (
            GalleryImageVersionPublishingProfile,
            GalleryImageVersionUpdate,
        )

        rg, gallery, definition, version = self._parts(image.image_id)
        update = GalleryImageVersionUpdate()
        update.publishing_profile = GalleryImageVersionPublishingProfile(
            target_regions=targets,
            exclude_from_latest=raw.publishing_profile.exclude_from_latest,
        )
        return self.versions.begin_update(rg, gallery, definition, version, update)

    def _replication_state(self, raw: GalleryImageVersion, region: str) -> str:
        summary = raw.replication_status.summary if raw.replication_status else []
        for entry in summary or []:
            if self._same_region(entry.region or "", region):
                return REPLICATION.get(str(getattr(entry.state, "value", entry.state)), "pending")
        return "pending"

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        raw = self._get_raw(image.image_id, expand="ReplicationStatus")
        if raw is None or not any(self._same_region(r, region) for r in self._target_regions(raw)):
            return ReplicaStatus(region=region, state="missing")
        summary = raw.replication_status.summary if raw.replication_status else []
        for entry in summary or []:
            if self._same_region(entry.region or "", region):
                state = self._replication_state(raw, region)
                return ReplicaStatus(region, state, image.image_id, detail=entry.details or "")
        return ReplicaStatus(region, "pending", image.image_id)

    def share(self, replica: CloudImage, sharing: Sharing) -> None:
        """Gallery sharing: principals are subscription ids, or ``tenant:<id>``.

        This is a direct shared gallery, a preview ("Share a gallery with all users in a
        subscription or tenant (preview)", Microsoft Learn, share-gallery-direct): it needs
        the preview's registration and a new gallery created with
        ``sharingProfile.permissions`` ``Groups`` ("You can't use an existing gallery, the
        property can't currently be updated"), and it shares
        the whole gallery, every image definition and version in it. So before sharing:
        the gallery's permissions are checked (an error says what to do), and a gallery
        holding any version that is not validated (a built, validating, blocked or
        inconclusive candidate, or one imagectl did not judge) is not shared: the sharing
        would hand those to the principals too. Keep candidates in a gallery of their
        own, never shared, and share the gallery promotion writes to."""
        from azure.mgmt.compute.models import SharingProfileGroup, SharingUpdate

        principals = list(sharing.principals)
        subs = [p for p in principals if not p.startswith("tenant:")]
        tenants = [p.split(":", 1)[1] for p in principals if p.startswith("tenant:")]
        groups = []
        if subs:
            groups.append(SharingProfileGroup(type="Subscriptions", ids=subs))
        if tenants:
            groups.append(SharingProfileGroup(type="AADTenants", ids=tenants))
        if not groups:
            return
        rg, gallery, _, _ = self._parts(replica.image_id)
        self._check_shareable(rg, gallery, replica.image_id)
        self.clients.compute.gallery_sharing_profile.begin_update(
            rg, gallery, SharingUpdate(operation_type="Add", groups=groups)
        ).result()

    def _check_shareable(self, rg: str, gallery: str, promoting: str) -> None:
        compute = self.clients.compute
        raw = compute.galleries.get(rg, gallery)
        profile = raw.sharing_profile
        value = profile.permissions if profile and profile.permissions else ""
        permissions = str(getattr(value, "value", value))  # the SDK's str enum, or text
        if permissions.lower() != "groups":
            raise CloudError(
                f"gallery {gallery} (resource group {rg}) cannot be shared with "
                f"subscriptions or tenants: its sharingProfile.permissions is "
                f"{permissions or 'unset (Private)'}, and direct sharing needs Groups",
                hint="Direct shared gallery is a preview: register for it "
                "(https://aka.ms/directsharedgallery-preview), then create a new gallery "
                "with `az sig create ... --permissions groups` (an existing gallery's "
                "permissions cannot be changed during the preview) and name it in "
                "clouds.azure.gallery; it shares the whole gallery, so keep candidates in "
                "another one. Or drop share.principals",
            )
        exposed = []
        for definition in compute.gallery_images.list_by_gallery(rg, gallery):
            if definition.name is None:  # ARM names every listed resource
                continue
            for version in compute.gallery_image_versions.list_by_gallery_image(
                rg, gallery, definition.name
            ):
                if (version.id or "").lower() == promoting.lower():
                    continue
                state = dict(version.tags or {}).get(TAG_STATE, "")
                if state not in SHAREABLE_STATES:
                    exposed.append(f"{definition.name}/{version.name} ({state or 'not judged'})")
        if exposed:
            raise CloudError(
                f"gallery {gallery} is not shared: direct sharing exposes every version in "
                f"it, and {len(exposed)} of them are not validated: {', '.join(exposed)}",
                hint="Delete those versions, or build candidates into a gallery that is "
                "never shared and promote into this one; then run the promotion again",
            )

    def _eligible(self, region: str) -> list[GalleryImageVersion]:
        out = []
        for raw in self._list_raw():
            profile = raw.publishing_profile
            if profile is None or profile.exclude_from_latest:
                continue
            # a version being replicated elsewhere is still what latest resolves to
            if raw.provisioning_state not in ("Succeeded", "Updating"):
                continue
            if not any(self._same_region(r, region) for r in self._target_regions(raw)):
                continue
            out.append(raw)
        return out

    def get_pointer(self, stack: str, region: str) -> str | None:
        """The version ``latest`` resolves to in ``region``: the highest version number
        among those not excluded from latest (the gallery's own rule)."""
        eligible = self._eligible(region)
        if not eligible:
            return None
        return str(max(eligible, key=lambda r: version_key(r.name or "")).id)

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        target = self._get_raw(image_id)
        if target is None:
            raise UserError(f"gallery image version {image_id} does not exist")
        if target.publishing_profile.exclude_from_latest:
            self._update(image_id, exclude_from_latest=False)
        for raw in self._eligible(region):
            # ARM fills a version's id and name (read-only) in every answer
            if str(raw.id).lower() != str(target.id).lower() and version_key(
                raw.name or ""
            ) > version_key(target.name or ""):
                self._update(str(raw.id), exclude_from_latest=True)

    # The canary pointer: the gallery version tagged imagectl:canary=true. A
    # candidate version stays excludeFromLatest, so "latest" never resolves to it; the
    # canary fleet names the tagged version explicitly (Azure Compute Gallery: a version
    # excluded from latest is used by its full id).
    def get_canary_pointer(self, stack: str, region: str) -> str | None:
        tagged = [
            raw for raw in self._list_raw()
            if dict(raw.tags or {}).get(TAG_CANARY) == "true"
            and any(self._same_region(r, region) for r in self._target_regions(raw))
        ]  # fmt: skip
        return str(max(tagged, key=lambda r: version_key(r.name or "")).id) if tagged else None

    def set_canary_pointer(self, stack: str, region: str, image_id: str | None) -> None:
        target = None
        if image_id is not None:
            target = self._get_raw(image_id)
            if target is None:
                raise UserError(f"gallery image version {image_id} does not exist")
        with self.write_lock:
            for raw in self._list_raw():
                tags = dict(raw.tags or {})
                wanted = target is not None and str(raw.id).lower() == str(target.id).lower()
                here = any(self._same_region(r, region) for r in self._target_regions(raw))
                if wanted and tags.get(TAG_CANARY) != "true":
                    self._update(str(raw.id), tags={**tags, TAG_CANARY: "true"})
                elif not wanted and here and TAG_CANARY in tags:
                    tags.pop(TAG_CANARY)
                    self._update(str(raw.id), tags=tags)

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        raw = self._get_raw(image.image_id)
        if raw is None:
            raise UserError(f"gallery image version {image.image_id} does not exist")
        tags = {
            **(raw.tags or {}),
            TAG_STATE: "deprecated",
            TAG_DEPRECATED_AT: iso(at or utcnow()),
        }
        if replacement is not None:
            tags[TAG_REPLACEMENT] = replacement.image_id
        self._update(
            image.image_id,
            tags=tags,
            exclude_from_latest=True,
            end_of_life_date=at or utcnow(),
        )

    def delete(self, image: CloudImage) -> None:
        from azure.core.exceptions import HttpResponseError

        rg, gallery, definition, version = self._parts(image.image_id)
        try:
            self.versions.begin_delete(rg, gallery, definition, version).result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                raise
