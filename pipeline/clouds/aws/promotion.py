"""AWS promotion primitives: copy_image per region (tagged by imagectl), launch
permissions, SSM parameter pointer, deprecation, deregistration.

The provider delegates its promotion methods here; this module owns no client of its own
(``self.p`` is the provider: clients, options, image readers).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from imagectl.clouds.aws.errors import error_code
from imagectl.clouds.aws.tags import tag_list
from imagectl.clouds.base import CloudImage, ReplicaStatus
from imagectl.clouds.common import iso, utcnow
from imagectl.errors import CloudError
from imagectl.tags import (
    TAG_DEPRECATED_AT,
    TAG_REPLACEMENT,
    TAG_REPLICA_TOKEN,
    TAG_SOURCE_IMAGE,
    TAG_STATE,
)

if TYPE_CHECKING:
    from imagectl.clouds.aws.provider import AwsProvider


class AwsPromotion:
    def __init__(self, provider: AwsProvider) -> None:
        self.p = provider

    def _replica(self, image: CloudImage, region: str) -> CloudImage | None:
        if region == image.region:
            return self.p.get_image(image.image_id, region)
        found = self.p.describe_images(
            region,
            Owners=["self"],
            Filters=[{"Name": f"tag:{TAG_SOURCE_IMAGE}", "Values": [image.image_id]}],
            IncludeDeprecated=True,
        )
        live = [r for r in found if r.get("State") != "deregistered"]
        # a working copy before a failed one (a failed attempt may not be deleted yet)
        live.sort(key=lambda r: (r.get("State") == "failed", str(r.get("CreationDate", ""))))
        return self.p._image(live[0], region) if live else None

    @staticmethod
    def _status(region: str, replica: CloudImage | None) -> ReplicaStatus:
        if replica is None:
            return ReplicaStatus(region=region, state="missing")
        state = {"available": "available", "pending": "pending", "deprecated": "available"}.get(
            replica.state, "failed"
        )
        return ReplicaStatus(region, state, replica.image_id, detail=replica.state)

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        """Start (or find again) the copy of ``image`` into ``region``.

        The copy's tags go in the ``CopyImage`` request (``TagSpecifications``: applied
        with the copy, so no ``CreateTags`` races EC2's eventual consistency) and its
        ``ClientToken`` makes a re-run get the same AMI back. A ``failed`` copy made
        with another token (an earlier attempt) is deregistered with its snapshots and
        the copy asked for again: a failed AMI never blocks a retry.
        """
        existing = self._replica(image, region)
        if existing is not None and existing.state == "failed":
            if existing.tags.get(TAG_REPLICA_TOKEN) == token[:255]:
                return self._status(region, existing)  # this very request failed
            self.delete(existing)
            existing = None
        if existing is not None:
            return self._status(region, existing)
        ec2 = self.p.clients.ec2(region)
        tags = {**image.tags, TAG_SOURCE_IMAGE: image.image_id, TAG_REPLICA_TOKEN: token[:255]}
        request: dict[str, Any] = {
            "Name": image.name or image.image_id,
            "SourceImageId": image.image_id,
            "SourceRegion": image.region,
            "ClientToken": token[:64],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("image", "snapshot")
            ],
        }
        key = self.p.kms_key_ids.get(region)
        if key:  # the region's own key: a shared encrypted copy needs one its users may use
            request.update(Encrypted=True, KmsKeyId=key)
        if self.p.time_bound_copy_minutes:
            request["SnapshotCopyCompletionDurationMinutes"] = self.p.time_bound_copy_minutes
        copy = ec2.copy_image(**request)
        new_id = str(copy["ImageId"])
        replica = self.p.get_image(new_id, region)
        if replica is None:  # eventual consistency: accepted, not yet visible
            return ReplicaStatus(region, "pending", new_id, detail="not visible yet")
        return self._status(region, replica)

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        return self._status(region, self._replica(image, region))

    def share(self, replica: CloudImage, sharing: Any) -> None:
        get = sharing.get if isinstance(sharing, dict) else lambda k, d=None: getattr(sharing, k, d)
        add: list[dict[str, str]] = []
        add += [{"UserId": str(a)} for a in get("accounts", []) or []]
        for arn in get("organizations", []) or []:
            key = "OrganizationalUnitArn" if ":ou/" in arn else "OrganizationArn"
            add.append({key: arn})
        if get("public", False):
            add.append({"Group": "all"})
        if not add:
            return
        self.p.clients.ec2(replica.region).modify_image_attribute(
            ImageId=replica.image_id, LaunchPermission={"Add": add}
        )

    def _parameter(self, stack: str) -> str:
        return f"{self.p.ssm_prefix}/{stack}/latest"

    def get_pointer(self, stack: str, region: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            resp = self.p.clients.ssm(region).get_parameter(Name=self._parameter(stack))
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        return str(resp["Parameter"]["Value"])

    def set_pointer(self, stack: str, region: str, image_id: str) -> None:
        """Write the ``aws:ec2:image`` parameter and read it back until it names
        ``image_id``: SSM validates such a value asynchronously and a 200 from
        ``PutParameter`` does not mean the parameter moved (SSM API reference,
        PutParameter, DataType). A value that never arrives is a ``CloudError``, so the
        catalog never records a flip the cloud did not make."""
        self.p.clients.ssm(region).put_parameter(
            Name=self._parameter(stack),
            Value=image_id,
            Type="String",
            DataType="aws:ec2:image",
            Overwrite=True,
            Tier=self.p.ssm_tier,
            Description=f"imagectl: the promoted image of stack {stack}",
        )
        deadline = time.monotonic() + self.p.pointer_timeout_s
        while True:
            current = self.get_pointer(stack, region)
            if current == image_id:
                return
            if time.monotonic() >= deadline:
                raise CloudError(
                    f"the SSM parameter {self._parameter(stack)} in {region} still names "
                    f"{current or 'nothing'}, not {image_id}, "
                    f"{self.p.pointer_timeout_s:g} s after it was written",
                    hint=(
                        f"SSM refuses an aws:ec2:image value whose AMI is not available in "
                        f"{region}: check that {image_id} exists there and is 'available', "
                        "then run the same command again"
                    ),
                )
            time.sleep(self.p.poll_interval_s)

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        ec2 = self.p.clients.ec2(image.region)
        # EC2 refuses a deprecation time in the past; "now" means the next minute.
        when = max(at or utcnow(), utcnow() + dt.timedelta(minutes=1))
        tags = {TAG_STATE: "deprecated", TAG_DEPRECATED_AT: iso(when)}
        if replacement is not None:
            tags[TAG_REPLACEMENT] = replacement.image_id
        ec2.create_tags(Resources=[image.image_id], Tags=tag_list(tags))
        ec2.enable_image_deprecation(ImageId=image.image_id, DeprecateAt=when)

    def delete(self, image: CloudImage) -> None:
        from botocore.exceptions import ClientError

        ec2 = self.p.clients.ec2(image.region)
        try:  # the snapshots go in the same call: none is left behind by a kill
            ec2.deregister_image(ImageId=image.image_id, DeleteAssociatedSnapshots=True)
        except ClientError as exc:
            if error_code(exc).startswith("InvalidAMIID"):
                return
            raise
