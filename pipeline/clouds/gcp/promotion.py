"""Google Cloud promotion primitives: one promoted image per promotion, IAM imageUser
bindings, the image family as pointer, deprecation, deletion.

Images and families are global. A promotion makes exactly one image, ``<family>-<source>``
(``member_name``), from the validated source, stored in the stack's storage locations
(``clouds.gcp.regions``: Cloud Storage multi-regions ``us``, ``eu``, ``asia`` or regions);
every target region's "replica" is that image, the source's own storage location
included: it is the image the family resolves to, so it is what every region's pointer
records. The image joins the family only when the pointer flips (``images.patch`` of
``family``: "Only the following fields can be modified: family, description, deprecation
status", Compute API reference, images.patch), once for every region. Rollback is
Compute's own model: members created after the target are deprecated, so
``getFromFamily`` resolves to the target; and it can be undone: a deprecated target is
made ``ACTIVE`` again ("To un-deprecate an image ... gcloud compute images deprecate
IMAGE --state=ACTIVE", gcloud reference, compute images deprecate; "You can revert a
deprecation (make an image active again), by changing the deprecation state to ACTIVE",
Compute Engine docs, "Deprecate a custom image").

The provider's promotion half: a mixin the provider class inherits (its clients, options
and image readers are the provider's own, declared below for the type checker), so the
provider's promotion methods are these, with no forwarding layer.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from typing import TYPE_CHECKING, Any

from imagectl.clouds.base import CloudImage, ReplicaStatus
from imagectl.clouds.common import iso, parse_time, utcnow
from imagectl.clouds.gcp import compute_sdk
from imagectl.clouds.gcp.pointers import family_name
from imagectl.clouds.gcp.resources import image_state, resource_name
from imagectl.core.errors import CloudError, UserError
from imagectl.crashpoints import crash_point
from imagectl.stacks.schema import Sharing
from imagectl.tags import TAG_SOURCE_IMAGE, TAG_STACK, gcp_label_key, gcp_label_value

IMAGE_USER = "roles/compute.imageUser"


def request_id(name: str) -> str:
    """Compute's ``requestId``: a UUID, the same for the same resource, so that a re-sent
    insert (a retry, a re-run) is recognised by the API instead of repeated."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"imagectl:{name}"))


def compute_v1_status(state: str, *, replacement: str = "") -> Any:
    compute_v1 = compute_sdk.compute_v1()

    status = compute_v1.DeprecationStatus(state=state)
    if replacement:
        status.replacement = replacement
    return status


if TYPE_CHECKING:
    from imagectl.clouds.gcp.clients import GcpClients


class GcpPromotion:
    if TYPE_CHECKING:  # the provider's members these methods use
        clients: GcpClients
        family: str | None
        project: str
        regions: list[str]

        def _get_raw(self, name: str) -> Any | None: ...

    def _init_promotion(self) -> None:
        """The promotion's own state; the provider's __init__ calls it."""
        # One image and one family for every region: the per-region calls that create
        # or flip it are serialised (the first does the work, the others find it done).
        self._pointer_lock = threading.Lock()
        self._copy_lock = threading.Lock()
        # promoted image name -> its insert operation: a failed insert leaves no image,
        # only a finished operation with an error (Compute API reference, Operation)
        self._inserts: dict[str, str] = {}

    def _family(self, stack: str) -> str:
        return family_name(self.family or stack, "latest")

    def member_name(self, family: str, source: str) -> str:
        """The one image a promotion of ``source`` makes (derived: a re-run finds it)."""
        return resource_name(family, source)[:63]

    def _source_family(self, image: CloudImage) -> str:
        return self.family or image.tags.get(TAG_STACK, "") or "imagectl"

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        """Find or make the promotion's one image (stored in every target location).
        A ``FAILED`` one from an earlier attempt is deleted and made again."""
        with self._copy_lock:
            status = self.replica_status(image, region)
            if status.state == "failed" and status.image_id != image.image_id:
                self.delete(CloudImage("gcp", "global", str(status.image_id)))
            elif status.state != "missing":
                return status
            name = self.member_name(self._source_family(image), image.image_id)
            op = self._insert_promoted(image.image_id, name, token=token)
            self._inserts[name] = str(op.name)
            return ReplicaStatus(region=region, state="pending", image_id=name)

    def _insert_promoted(self, source: str, name: str, *, token: str) -> Any:
        compute_v1 = compute_sdk.compute_v1()

        raw = self._get_raw(source)
        if raw is None:
            raise UserError(f"image {source} is not in project {self.project}")
        request = compute_v1.InsertImageRequest(
            project=self.project,
            request_id=request_id(f"{name}|{token}"),
            image_resource=compute_v1.Image(
                name=name,
                source_image=f"projects/{self.project}/global/images/{source}",
                storage_locations=list(self.regions or raw.storage_locations),
                labels={
                    **dict(raw.labels),
                    gcp_label_key(TAG_SOURCE_IMAGE): gcp_label_value(source),
                },
                description=f"imagectl: promoted copy of {source}",
            ),
        )
        return self.clients.images.insert(request=request, retry=self.clients.retry)

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        """The promotion's one image in ``region``, also where the source is stored: the
        family resolves to it, never to the source (``_set_family_pointer``)."""
        name = self.member_name(self._source_family(image), image.image_id)
        raw = self._get_raw(name)
        if raw is None:
            failed = self._inserts.get(name)
            error = self.clients.operation_error(failed) if failed else None
            if error:
                return ReplicaStatus(region, "failed", name, detail=f"images.insert: {error}")
            return ReplicaStatus(region=region, state="missing")
        if region not in raw.storage_locations:
            return ReplicaStatus(region, "failed", raw.name, detail=f"not stored in {region}")
        return ReplicaStatus(region, _usable(image_state(raw)), raw.name)

    def share(self, replica: CloudImage, sharing: Sharing) -> None:
        members = list(sharing.principals)
        if sharing.public:
            members.append("allAuthenticatedUsers")
        if not members:
            return
        self._grant(replica.image_id, members)

    def _grant(self, image: str, members: list[str]) -> None:
        compute_v1 = compute_sdk.compute_v1()

        role = IMAGE_USER
        policy = self.clients.images.get_iam_policy(
            project=self.project, resource=image, retry=self.clients.retry
        )
        bindings = [b for b in policy.bindings if b.role != role]
        current = next((list(b.members) for b in policy.bindings if b.role == role), [])
        merged = sorted(set(current) | set(members))
        if set(current) >= set(members):
            return
        bindings.append(compute_v1.Binding(role=role, members=merged))
        self.clients.images.set_iam_policy(
            project=self.project,
            resource=image,
            global_set_policy_request_resource=compute_v1.GlobalSetPolicyRequest(
                policy=compute_v1.Policy(bindings=bindings, etag=policy.etag)
            ),
            retry=self.clients.retry,
        )

    def get_pointer(self, stack: str, region: str, family: str | None = None) -> str | None:
        from google.api_core.exceptions import NotFound

        try:
            raw = self.clients.images.get_from_family(
                project=self.project, family=family or self._family(stack),
                retry=self.clients.retry,
            )  # fmt: skip
        except NotFound:
            return None
        return str(raw.name)

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        with self._pointer_lock:
            self._set_family_pointer(stack, image_id)

    # The canary pointer: a second family, ``<family>-canary`` (``pointers.names``: never
    # cut to fit), since one family resolves to one image (getFromFamily: its newest
    # non-deprecated member). The canary image itself (the validated source, in no family)
    # joins it; going back deprecates the newer members, so the family resolves to the one
    # before, or to nothing.
    def _canary_family(self, stack: str) -> str:
        return family_name(self.family or stack, "canary")

    def get_canary_pointer(self, stack: str, region: str) -> str | None:
        return self.get_pointer(stack, region, family=self._canary_family(stack))

    def set_canary_pointer(self, stack: str, region: str, image_id: str | None) -> None:
        with self._pointer_lock:
            self._set_family_pointer(stack, image_id, family=self._canary_family(stack))

    def _set_family_pointer(
        self, stack: str, image_id: str | None, *, family: str | None = None
    ) -> None:
        """Make the family resolve to ``image_id``'s promoted image: it joins the family
        (once, for every region), members created after it are deprecated. With
        ``family`` (the canary's), the image itself joins, and must be in no other family
        (a promoted member is latest's); ``image_id`` None deprecates every member."""
        canary = family is not None
        family = family or self._family(stack)
        if image_id is None:
            for other in self.clients.images.list(project=self.project, retry=self.clients.retry):
                active = not other.deprecated or other.deprecated.state in ("", "ACTIVE")
                if other.family == family and active:
                    self._set_deprecation(other.name, compute_v1_status("DEPRECATED"))
            return
        raw = self._get_raw(image_id)
        if raw is None:
            raise UserError(f"image {image_id} is not in project {self.project}")
        if canary and raw.family not in ("", family):
            raise CloudError(
                f"image {raw.name} is in family {raw.family}: it cannot also be the canary "
                f"(family {family}); one image has one family",
                hint="Point the canary at the validated source image instead",
            )
        if raw.family != family and canary:
            self._join_family(raw, family)
            raw = self._get_raw(raw.name)
            assert raw is not None
        if raw.family != family:
            name = self.member_name(family, image_id)
            if not self._source_of(raw):  # the source: its promoted image is the member
                member = self._get_raw(name)
                if member is None:  # every region held the source: make it now
                    self.clients.wait(self._insert_promoted(image_id, name, token="flip"))
                    member = self._get_raw(name)
                raw = member
            assert raw is not None
            if raw.family != family:
                self._join_family(raw, family)
                raw = self._get_raw(raw.name)
                assert raw is not None
        if raw.deprecated and raw.deprecated.state not in ("", "ACTIVE"):
            # rolled back (or retired) before: the family skips it until it is ACTIVE again
            self._set_deprecation(raw.name, compute_v1_status("ACTIVE"))
            raw = self._get_raw(raw.name)
            assert raw is not None
            if raw.deprecated and raw.deprecated.state not in ("", "ACTIVE"):
                raise CloudError(
                    f"image {raw.name} of family {family} stays {raw.deprecated.state} after "
                    "images.deprecate with state ACTIVE",
                    hint="Promote a new validated image instead (`imagectl promote`)",
                )
        source = self._source_of(raw)
        if source:
            self._copy_image_users(source, raw.name)
        target_created = parse_time(raw.creation_timestamp) or utcnow()
        for other in self.clients.images.list(project=self.project, retry=self.clients.retry):
            if other.family != family or other.name == raw.name:
                continue
            active = not other.deprecated or other.deprecated.state in ("", "ACTIVE")
            created = parse_time(other.creation_timestamp) or utcnow()
            if active and created >= target_created:  # times, not strings: offsets vary
                self._set_deprecation(
                    other.name,
                    compute_v1_status("DEPRECATED", replacement=raw.self_link or raw.name),
                )

    @staticmethod
    def _source_of(raw: Any) -> str:
        return str(dict(raw.labels).get(gcp_label_key(TAG_SOURCE_IMAGE), ""))

    def _join_family(self, raw: Any, family: str) -> None:
        compute_v1 = compute_sdk.compute_v1()

        op = self.clients.images.patch(
            project=self.project,
            image=raw.name,
            image_resource=compute_v1.Image(family=family),
            retry=self.clients.retry,
        )

        crash_point("inside_family_member")
        self.clients.wait(op)

    def _copy_image_users(self, source: str, member: str) -> None:
        """Consumers use the image the family resolves to: it gets the source's
        ``compute.imageUser`` members (set by ``share``)."""
        if source == member:
            return
        policy = self.clients.images.get_iam_policy(
            project=self.project, resource=source, retry=self.clients.retry
        )
        members = [m for b in policy.bindings if b.role == IMAGE_USER for m in b.members]
        if members:
            self._grant(member, members)

    def _set_deprecation(self, name: str, status: Any) -> None:
        op = self.clients.images.deprecate(
            project=self.project,
            image=name,
            deprecation_status_resource=status,
            retry=self.clients.retry,
        )
        self.clients.wait(op)

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        compute_v1 = compute_sdk.compute_v1()

        status = compute_v1.DeprecationStatus(state="DEPRECATED", deprecated=iso(at or utcnow()))
        if replacement is not None:
            status.replacement = f"projects/{self.project}/global/images/{replacement.image_id}"
        self._set_deprecation(image.image_id, status)

    def delete(self, image: CloudImage) -> None:
        from google.api_core.exceptions import NotFound

        try:
            op = self.clients.images.delete(
                project=self.project, image=image.image_id, retry=self.clients.retry
            )
        except NotFound:
            return
        self.clients.wait(op)


def _usable(state: str) -> str:
    return "available" if state == "deprecated" else state
