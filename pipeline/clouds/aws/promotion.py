"""AWS promotion primitives: copy_image per region (tagged by imagectl), launch
permissions, SSM parameter pointer, deprecation, deregistration.

The provider's promotion half: a mixin the provider class inherits (its clients, options
and image readers are the provider's own, declared below for the type checker), so the
provider's promotion methods are these, with no forwarding layer.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from imagectl.clouds.aws.errors import error_code
from imagectl.clouds.aws.pointers import parameter_name
from imagectl.clouds.aws.tags import tag_list
from imagectl.clouds.base import CloudImage, ReplicaStatus
from imagectl.clouds.common import iso, utcnow
from imagectl.core.errors import CloudError
from imagectl.stacks.schema import Sharing
from imagectl.tags import (
    TAG_DEPRECATED_AT,
    TAG_REPLACEMENT,
    TAG_REPLICA_TOKEN,
    TAG_SOURCE_IMAGE,
    TAG_STATE,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import (
        CopyImageRequestTypeDef,
        ImageTypeDef,
        LaunchPermissionTypeDef,
    )

    from imagectl.clouds.aws.clients import AwsClients


class AwsPromotion:
    if TYPE_CHECKING:  # the provider's members these methods use
        clients: AwsClients
        copy_ids: dict[tuple[str, str], str]  # (source AMI, region) -> CopyImage's answer
        kms_key_ids: dict[str, str]
        pointer_timeout_s: float
        poll_interval_s: float
        ssm_prefix: str
        ssm_tier: str
        time_bound_copy_minutes: int | None

        def _image(self, raw: ImageTypeDef, region: str) -> CloudImage: ...
        def describe_images(self, region: str, **kwargs: Any) -> list[ImageTypeDef]: ...
        def get_image(self, image_id: str, region: str) -> CloudImage | None: ...

    def _replica(self, image: CloudImage, region: str) -> CloudImage | None:
        """The copy of ``image`` in ``region``, by what EC2 returns for it: its tag (set
        by ``CopyImage``'s ``TagSpecifications``), else EC2's own record of where an AMI
        was copied from (the ``source-image-id`` / ``source-image-region`` filters of
        ``DescribeImages``, ``Image.SourceImageId``: set with or without tags), else the
        id ``CopyImage`` answered in this process (read by id, the freshest read)."""
        if region == image.region:
            return self.get_image(image.image_id, region)
        by_tag = [{"Name": f"tag:{TAG_SOURCE_IMAGE}", "Values": [image.image_id]}]
        by_source = [
            {"Name": "source-image-id", "Values": [image.image_id]},
            {"Name": "source-image-region", "Values": [image.region]},
        ]
        for filters in (by_tag, by_source):
            found = self.describe_images(
                region, Owners=["self"], Filters=filters, IncludeDeprecated=True
            )
            live = [r for r in found if r.get("State") != "deregistered"]
            if live:
                # a working copy before a failed one (a failed attempt may not be gone yet)
                live.sort(
                    key=lambda r: (r.get("State") == "failed", str(r.get("CreationDate", "")))
                )
                return self._image(live[0], region)
        copy_id = self.copy_ids.get((image.image_id, region))
        return self.get_image(copy_id, region) if copy_id else None

    @staticmethod
    def _status(region: str, replica: CloudImage | None) -> ReplicaStatus:
        if replica is None:
            return ReplicaStatus(region=region, state="missing")
        state = {"available": "available", "pending": "pending", "deprecated": "available"}.get(
            replica.state, "failed"
        )
        return ReplicaStatus(region, state, replica.image_id, detail=replica.state)

    def _copy_tags(self, image: CloudImage, token: str) -> dict[str, str]:
        return {**image.tags, TAG_SOURCE_IMAGE: image.image_id, TAG_REPLICA_TOKEN: token[:255]}

    def _retag(self, replica: CloudImage, tags: dict[str, str]) -> None:
        """A copy found without its tags (they did not arrive with it) gets them, so
        every tag-based query (drift, retention, ``find_images``) sees it too."""
        if replica.tags.get(TAG_SOURCE_IMAGE) == tags[TAG_SOURCE_IMAGE]:
            return
        keep = {k: v for k, v in tags.items() if k != TAG_REPLICA_TOKEN}
        if TAG_REPLICA_TOKEN in replica.tags:
            keep[TAG_REPLICA_TOKEN] = replica.tags[TAG_REPLICA_TOKEN]
        self.clients.ec2(replica.region).create_tags(
            Resources=[replica.image_id], Tags=tag_list(keep)
        )
        replica.tags.update(keep)

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        """Start (or find again) the copy of ``image`` into ``region``.

        A copy that exists (found by ``_replica``: tag, EC2's source-image record, or
        the id this process was answered) is used, whatever token made it: a retry never
        asks for a second copy. Otherwise ``CopyImage`` is asked with the copy's tags in
        the request (``TagSpecifications``: applied with the copy, so no ``CreateTags``
        races EC2's eventual consistency) and a ``ClientToken``: the same token returns
        the same AMI (EC2 API reference, "Ensuring idempotency"), so a re-run whose
        first answer was lost gets that AMI back, not another. A ``failed`` copy made by
        another request (an earlier attempt) is deregistered with its snapshots and the
        copy asked for again: a failed AMI never blocks a retry.
        """
        key = (image.image_id, region)
        tags = self._copy_tags(image, token)
        existing = self._replica(image, region)
        if existing is not None and existing.state == "failed":
            if (
                existing.tags.get(TAG_REPLICA_TOKEN) == token[:255]
                or self.copy_ids.get(key) == existing.image_id
            ):
                return self._status(region, existing)  # this very request failed
            self.delete(existing)
            existing = None
        if existing is not None:
            self._retag(existing, tags)
            return self._status(region, existing)
        ec2 = self.clients.ec2(region)
        request: CopyImageRequestTypeDef = {
            "Name": image.name or image.image_id,
            "SourceImageId": image.image_id,
            "SourceRegion": image.region,
            "ClientToken": token[:64],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("image", "snapshot")
            ],
        }
        key_id = self.kms_key_ids.get(region)
        if key_id:  # the region's own key: a shared encrypted copy needs one its users may use
            request["Encrypted"], request["KmsKeyId"] = True, key_id
        if self.time_bound_copy_minutes:
            request["SnapshotCopyCompletionDurationMinutes"] = self.time_bound_copy_minutes
        copy = ec2.copy_image(**request)
        new_id = str(copy["ImageId"])
        self.copy_ids[key] = new_id
        replica = self.get_image(new_id, region)
        if replica is None:  # eventual consistency: accepted, not yet visible
            return ReplicaStatus(region, "pending", new_id, detail="not visible yet")
        self._retag(replica, tags)
        return self._status(region, replica)

    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus:
        return self._status(region, self._replica(image, region))

    def share(self, replica: CloudImage, sharing: Sharing) -> None:
        add: list[LaunchPermissionTypeDef] = [{"UserId": a} for a in sharing.accounts]
        for arn in sharing.organizations:
            add.append(
                {"OrganizationalUnitArn": arn} if ":ou/" in arn else {"OrganizationArn": arn}
            )
        if sharing.public:
            self._check_public_sharing_allowed(replica.region)
            add.append({"Group": "all"})
        if not add:
            return
        self.clients.ec2(replica.region).modify_image_attribute(
            ImageId=replica.image_id, LaunchPermission={"Add": add}
        )

    def _check_public_sharing_allowed(self, region: str) -> None:
        """Block public access for AMIs, an account setting per Region, refuses every
        public share while it is ``block-new-sharing`` ("This will block any attempt to
        publicly share your AMIs in the specified Region", EC2 API reference,
        EnableImageBlockPublicAccess; on by default for new accounts). Read it first, so
        the refusal names the setting instead of failing inside ModifyImageAttribute."""
        state = self.clients.ec2(region).get_image_block_public_access_state()
        if state.get("ImageBlockPublicAccessState") == "block-new-sharing":
            raise CloudError(
                f"share.public is set, but block public access for AMIs is on in {region} "
                "(GetImageBlockPublicAccessState: block-new-sharing), and AWS refuses to "
                "make any AMI of this account public there",
                hint=f"Share with accounts or organizations (share.accounts, "
                f"share.organizations) instead, or, if this account may publish public "
                f"AMIs, turn the setting off: aws ec2 disable-image-block-public-access "
                f"--region {region} (it takes up to 10 minutes)",
            )

    def _parameter(self, stack: str, pointer: str = "latest") -> str:
        return parameter_name(self.ssm_prefix, stack, pointer)

    def get_pointer(self, stack: str, region: str, pointer: str = "latest") -> str | None:
        from botocore.exceptions import ClientError

        try:
            resp = self.clients.ssm(region).get_parameter(Name=self._parameter(stack, pointer))
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        return str(resp["Parameter"]["Value"])

    def set_pointer(self, stack: str, region: str, image_id: str, pointer: str = "latest") -> None:
        """Write the ``aws:ec2:image`` parameter and read it back until it names
        ``image_id``: SSM validates such a value asynchronously and a 200 from
        ``PutParameter`` does not mean the parameter moved (SSM API reference,
        PutParameter, DataType). A value that never arrives is a ``CloudError``, so the
        catalog never records a flip the cloud did not make."""
        self.clients.ssm(region).put_parameter(
            Name=self._parameter(stack, pointer),
            Value=image_id,
            Type="String",
            DataType="aws:ec2:image",
            Overwrite=True,
            Tier=self.ssm_tier,
            Description=f"imagectl: the {'promoted' if pointer == 'latest' else pointer} "
            f"image of stack {stack}",
        )
        deadline = time.monotonic() + self.pointer_timeout_s
        while True:
            current = self.get_pointer(stack, region, pointer)
            if current == image_id:
                return
            if time.monotonic() >= deadline:
                raise CloudError(
                    f"the SSM parameter {self._parameter(stack, pointer)} in {region} still names "
                    f"{current or 'nothing'}, not {image_id}, "
                    f"{self.pointer_timeout_s:g} s after it was written",
                    hint=(
                        f"SSM refuses an aws:ec2:image value whose AMI is not available in "
                        f"{region}: check that {image_id} exists there and is 'available', "
                        "then run the same command again"
                    ),
                )
            time.sleep(self.poll_interval_s)

    # The canary pointer: a second aws:ec2:image parameter beside latest,
    # /<prefix>/<stack>/canary (``pointers.names``), written and read back the same way.
    def get_canary_pointer(self, stack: str, region: str) -> str | None:
        return self.get_pointer(stack, region, "canary")

    def set_canary_pointer(self, stack: str, region: str, image_id: str | None) -> None:
        if image_id is not None:
            self.set_pointer(stack, region, image_id, "canary")
            return
        from botocore.exceptions import ClientError

        try:  # removed: canary nodes resolve latest again (their launch falls back to it)
            self.clients.ssm(region).delete_parameter(Name=self._parameter(stack, "canary"))
        except ClientError as exc:
            if error_code(exc) != "ParameterNotFound":
                raise

    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None:
        ec2 = self.clients.ec2(image.region)
        # EC2 refuses a deprecation time in the past; "now" means the next minute.
        when = max(at or utcnow(), utcnow() + dt.timedelta(minutes=1))
        tags = {TAG_STATE: "deprecated", TAG_DEPRECATED_AT: iso(when)}
        if replacement is not None:
            tags[TAG_REPLACEMENT] = replacement.image_id
        ec2.create_tags(Resources=[image.image_id], Tags=tag_list(tags))
        ec2.enable_image_deprecation(ImageId=image.image_id, DeprecateAt=when)

    def delete(self, image: CloudImage) -> None:
        from botocore.exceptions import ClientError

        ec2 = self.clients.ec2(image.region)
        try:  # the snapshots go in the same call: none is left behind by a kill
            ec2.deregister_image(ImageId=image.image_id, DeleteAssociatedSnapshots=True)
        except ClientError as exc:
            if error_code(exc).startswith("InvalidAMIID"):
                return
            raise
