"""AWS promotion primitives: copy_image per region (tagged by imagectl), launch
permissions, SSM parameter pointer, deprecation, deregistration.

The provider delegates its promotion methods here; this module owns no client of its own
(``self.p`` is the provider: clients, options, image readers).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from imagectl.clouds.aws.errors import error_code
from imagectl.clouds.aws.tags import tag_dict, tag_list
from imagectl.clouds.base import (
    TAG_STATE,
    CloudImage,
    ReplicaStatus,
)
from imagectl.clouds.common import (
    TAG_REPLICA_TOKEN,
    TAG_SOURCE_IMAGE,
    iso,
    utcnow,
)

if TYPE_CHECKING:
    from imagectl.clouds.aws.provider import AwsProvider


class AwsPromotion:
    def __init__(self, provider: AwsProvider) -> None:
        self.p = provider

    def _replica(self, image: CloudImage, region: str) -> CloudImage | None:
        if region == image.region:
            return self.p.get_image(image.image_id, region)
        resp = self.p.clients.ec2(region).describe_images(
            Owners=["self"],
            Filters=[{"Name": f"tag:{TAG_SOURCE_IMAGE}", "Values": [image.image_id]}],
            IncludeDeprecated=True,
        )
        live = [r for r in resp["Images"] if r.get("State") != "deregistered"]
        return self.p._image(live[0], region) if live else None

    @staticmethod
    def _status(region: str, replica: CloudImage | None) -> ReplicaStatus:
        if replica is None:
            return ReplicaStatus(region=region, state="missing")
        state = {"available": "available", "pending": "pending", "deprecated": "available"}.get(
            replica.state, "failed"
        )
        return ReplicaStatus(region, state, replica.image_id, detail=replica.state)

    def _orphan(self, image: CloudImage, region: str) -> dict[str, Any] | None:
        """A copy of ``image`` in ``region`` that was never tagged as its replica.

        A run killed between ``CopyImage`` and the tagging leaves one where the cloud
        did not apply the request's tags (real EC2 applies ``TagSpecifications`` with
        the copy and returns the same AMI for the same ``ClientToken``; emulators may
        do neither). AMI names are unique per account and region, so our image's name
        without a source tag is that copy. ``SourceImageId`` is compared when reported.
        """
        if not image.name:
            return None
        resp = self.p.clients.ec2(region).describe_images(
            Owners=["self"],
            Filters=[{"Name": "name", "Values": [image.name]}],
            IncludeDeprecated=True,
        )
        for raw in sorted(resp["Images"], key=lambda r: str(r.get("CreationDate", ""))):
            if raw.get("State") == "deregistered" or TAG_SOURCE_IMAGE in tag_dict(raw.get("Tags")):
                continue
            if raw.get("SourceImageId", image.image_id) == image.image_id:
                return dict(raw)
        return None

    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        existing = self._replica(image, region)
        if existing is not None:
            return self._status(region, existing)
        ec2 = self.p.clients.ec2(region)
        tags = {**image.tags, TAG_SOURCE_IMAGE: image.image_id, TAG_REPLICA_TOKEN: token[:255]}
        orphan = self._orphan(image, region)
        if orphan is not None:  # adopted: tagged below, not copied a second time
            new_id = str(orphan["ImageId"])
        else:
            copy = ec2.copy_image(
                Name=image.name or image.image_id,
                SourceImageId=image.image_id,
                SourceRegion=image.region,
                ClientToken=token[:64],
                TagSpecifications=[
                    {"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("image", "snapshot")
                ],
            )
            new_id = str(copy["ImageId"])
        # Tagged again: emulators (moto) ignore TagSpecifications on CopyImage.
        resources = [new_id, *self.p._snapshots(new_id, region)]
        ec2.create_tags(Resources=resources, Tags=tag_list(tags))
        return self._status(region, self.p.get_image(new_id, region))

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
        self.p.clients.ssm(region).put_parameter(
            Name=self._parameter(stack),
            Value=image_id,
            Type="String",
            DataType="aws:ec2:image",
            Overwrite=True,
            Description=f"imagectl: the promoted image of stack {stack}",
        )

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
        tags = {TAG_STATE: "deprecated", "imagectl:deprecated-at": iso(when)}
        if replacement is not None:
            tags["imagectl:replacement"] = replacement.image_id
        ec2.create_tags(Resources=[image.image_id], Tags=tag_list(tags))
        ec2.enable_image_deprecation(ImageId=image.image_id, DeprecateAt=when)

    def delete(self, image: CloudImage) -> None:
        from botocore.exceptions import ClientError

        ec2 = self.p.clients.ec2(image.region)
        try:
            snapshots = self.p._snapshots(image.image_id, image.region)
            ec2.deregister_image(ImageId=image.image_id)
        except ClientError as exc:
            if error_code(exc).startswith("InvalidAMIID"):
                return
            raise
        for snapshot in snapshots:
            try:
                ec2.delete_snapshot(SnapshotId=snapshot)
            except ClientError as exc:
                if not error_code(exc).startswith("InvalidSnapshot"):
                    raise
