"""Google Cloud promotion primitives: storage-location copies, IAM imageUser bindings, the
image family as pointer, deprecation, deletion.

The provider delegates its promotion methods here; this module owns no client of its own
(``self.p`` is the provider: clients, options, image readers).
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING, Any

from imagectl.clouds.base import (
    CloudImage,
    ReplicaStatus,
)
from imagectl.clouds.common import (
    TAG_SOURCE_IMAGE,
    gcp_label_key,
    gcp_label_value,
    iso,
    utcnow,
)
from imagectl.clouds.gcp.labels import to_labels
from imagectl.clouds.gcp.resources import image_state, resource_name
from imagectl.errors import UserError

if TYPE_CHECKING:
    from imagectl.clouds.gcp.provider import GcpProvider


class GcpPromotion:
    def __init__(self, provider: GcpProvider) -> None:
        self.p = provider
        # The family is one pointer for every region: promotion flips regions in
        # parallel, so the per-region calls are serialised (the first does the work,
        # the others find it done).
        self._pointer_lock = threading.Lock()

    def _replica_name(self, image: CloudImage, region: str) -> str:
        return resource_name(image.image_id[:50], region)

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        """Images are global; a "region" is a storage location. An image already stored
        there is its own replica; otherwise a copy stored there is created (idempotent:
        the copy's name is derived from the source and the location)."""
        from google.cloud import compute_v1

        status = self.replica_status(image, region)
        if status.state != "missing":
            return status
        labels = to_labels({**image.tags, TAG_SOURCE_IMAGE: image.image_id})
        name = self._replica_name(image, region)
        self.p.clients.images.insert(
            project=self.p.project,
            image_resource=compute_v1.Image(
                name=name,
                source_image=f"projects/{self.p.project}/global/images/{image.image_id}",
                storage_locations=[region],
                labels=labels,
                description=f"imagectl replica of {image.image_id} (token {token[:40]})",
            ),
            retry=self.p.clients.retry,
        )
        return ReplicaStatus(region=region, state="pending", image_id=name)

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        source = self.p._get_raw(image.image_id)
        if source is not None and region in source.storage_locations:
            return ReplicaStatus(region, image_state(source), image.image_id)
        raw = self.p._get_raw(self._replica_name(image, region))
        if raw is None:
            return ReplicaStatus(region=region, state="missing")
        state = image_state(raw)
        return ReplicaStatus(region, "available" if state == "deprecated" else state, raw.name)

    def share(self, replica: CloudImage, sharing: Any) -> None:
        from google.cloud import compute_v1

        get = sharing.get if isinstance(sharing, dict) else lambda k, d=None: getattr(sharing, k, d)
        members = [str(p) for p in get("principals", []) or []]
        if get("public", False):
            members.append("allAuthenticatedUsers")
        if not members:
            return
        role = "roles/compute.imageUser"
        policy = self.p.clients.images.get_iam_policy(
            project=self.p.project, resource=replica.image_id, retry=self.p.clients.retry
        )
        bindings = [b for b in policy.bindings if b.role != role]
        current = next((list(b.members) for b in policy.bindings if b.role == role), [])
        merged = sorted(set(current) | set(members))
        bindings.append(compute_v1.Binding(role=role, members=merged))
        self.p.clients.images.set_iam_policy(
            project=self.p.project,
            resource=replica.image_id,
            global_set_policy_request_resource=compute_v1.GlobalSetPolicyRequest(
                policy=compute_v1.Policy(bindings=bindings, etag=policy.etag)
            ),
            retry=self.p.clients.retry,
        )

    def _family(self, stack: str) -> str:
        return self.p.family or stack

    def get_pointer(self, stack: str, region: str) -> str | None:
        from google.api_core.exceptions import NotFound

        try:
            raw = self.p.clients.images.get_from_family(
                project=self.p.project, family=self._family(stack), retry=self.p.clients.retry
            )
        except NotFound:
            return None
        return str(raw.name)

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        with self._pointer_lock:
            self._set_family_pointer(stack, image_id)

    def _set_family_pointer(self, stack: str, image_id: str) -> None:
        """Make ``image_id`` what the stack's family resolves to.

        A candidate belongs to no family, so the first time it is copied into the family
        (``<family>-<image>``); newer family members are deprecated (that is how a family
        rolls back) and a deprecated target is made ACTIVE again. ``get_pointer`` then
        returns the family member's name.
        """
        from google.cloud import compute_v1

        family = self._family(stack)
        raw = self.p._get_raw(image_id)
        if raw is None:
            raise UserError(f"image {image_id} is not in project {self.p.project}")
        if raw.family != family:
            member_name = resource_name(family, image_id)[:63]
            member = self.p._get_raw(member_name)
            if member is None:
                op = self.p.clients.images.insert(
                    project=self.p.project,
                    image_resource=compute_v1.Image(
                        name=member_name,
                        family=family,
                        source_image=f"projects/{self.p.project}/global/images/{image_id}",
                        storage_locations=list(raw.storage_locations),
                        labels={
                            **dict(raw.labels),
                            gcp_label_key(TAG_SOURCE_IMAGE): gcp_label_value(image_id),
                        },
                    ),
                    retry=self.p.clients.retry,
                )
                self.p.clients.wait(op)
                member = self.p._get_raw(member_name)
            raw = member
        assert raw is not None
        if raw.deprecated and raw.deprecated.state not in ("", "ACTIVE"):
            self._set_deprecation(raw.name, compute_v1.DeprecationStatus(state="ACTIVE"))
        target_created = raw.creation_timestamp
        for other in self.p.clients.images.list(project=self.p.project, retry=self.p.clients.retry):
            if other.family != family or other.name == raw.name:
                continue
            active = not other.deprecated or other.deprecated.state in ("", "ACTIVE")
            if active and other.creation_timestamp >= target_created:
                self._set_deprecation(
                    other.name,
                    compute_v1.DeprecationStatus(
                        state="DEPRECATED", replacement=raw.self_link or raw.name
                    ),
                )

    def _set_deprecation(self, name: str, status: Any) -> None:
        op = self.p.clients.images.deprecate(
            project=self.p.project,
            image=name,
            deprecation_status_resource=status,
            retry=self.p.clients.retry,
        )
        self.p.clients.wait(op)

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        from google.cloud import compute_v1

        status = compute_v1.DeprecationStatus(state="DEPRECATED", deprecated=iso(at or utcnow()))
        if replacement is not None:
            status.replacement = f"projects/{self.p.project}/global/images/{replacement.image_id}"
        self._set_deprecation(image.image_id, status)

    def delete(self, image: CloudImage) -> None:
        from google.api_core.exceptions import NotFound

        try:
            op = self.p.clients.images.delete(
                project=self.p.project, image=image.image_id, retry=self.p.clients.retry
            )
        except NotFound:
            return
        self.p.clients.wait(op)
