"""The AWS provider: AMIs by tag, EC2 instances for validation, copies, SSM pointers."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from imagectl.clouds.aws import addresses, network
from imagectl.clouds.aws import placement as aws_placement
from imagectl.clouds.aws.clients import AwsClients
from imagectl.clouds.aws.efa import efa_cards, efa_interfaces
from imagectl.clouds.aws.errors import error_code, translate_launch_error
from imagectl.clouds.aws.promotion import AwsPromotion
from imagectl.clouds.aws.spec import SPEC, AwsOptions, region_of
from imagectl.clouds.aws.tags import tag_dict, tag_list
from imagectl.clouds.base import CloudImage, ImageQuery, Instance, LaunchRequest, Provider
from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.common import (
    NotReachable,
    launch_failure,
    launch_tags,
    parse_time,
    utcnow,
)
from imagectl.clouds.placement import ManagedPlacement, Placement
from imagectl.core.errors import CloudError, UserError
from imagectl.tags import TAG_MANAGED, TAG_STACK, TAG_TTL
from imagectl.validators.identity import ImageRef

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import FilterTypeDef, ImageTypeDef, InstanceTypeDef

    from imagectl.stacks.resolve import ResolvedStack

LIVE_STATES = ["pending", "running", "stopping", "stopped"]


def _user_data(ssh_public_key: str | None) -> str:
    """cloud-init: the run's one-off SSH key; no key pair resource to clean up."""
    lines = ["#cloud-config"]
    if ssh_public_key:
        lines += ["ssh_authorized_keys:", f"  - {ssh_public_key.strip()}"]
    return "\n".join(lines) + "\n"


def _instance_groups(raw: InstanceTypeDef) -> list[str]:
    """The security groups an instance uses: its own list and its interfaces' (an EFA
    launch names its group per interface, ``NetworkInterfaces[].Groups``)."""
    groups = list(raw.get("SecurityGroups") or [])
    for nic in raw.get("NetworkInterfaces") or []:
        groups += list(nic.get("Groups") or [])
    return list(dict.fromkeys(str(g["GroupId"]) for g in groups))


class AwsProvider(AwsPromotion, Provider):
    spec = SPEC
    cloud = SPEC.name

    def __init__(self, options: AwsOptions) -> None:
        home = (
            options.region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        self.region = home
        self.regions = list(options.regions or [home])
        if home not in self.regions:
            self.regions.insert(0, home)
        self.clients = AwsClients(
            region=home,
            endpoint_url=options.endpoint_url,
            session=options.session,
            retry_mode=options.retry_mode,
            max_attempts=options.max_attempts,
            profile=options.profile,
        )
        self.poll_interval_s = options.poll_interval_s
        self.subnet_id = options.subnet_id
        self.instance_profile = options.instance_profile
        self.ssm_prefix = "/" + options.ssm_prefix.strip("/")
        self.ssm_tier = options.ssm_tier  # Advanced: shareable with AWS RAM
        # how long an aws:ec2:image parameter may take to pass SSM's validation
        self.pointer_timeout_s = options.pointer_timeout_s
        # how long terminate waits for 'terminated' before leaving the group to the reaper
        self.terminate_wait_s = options.terminate_wait_s
        # EFA hosts with several interfaces that get an Elastic IP once running
        self._public: set[str] = set()
        # a multi-node run's one security group, by placement name (its hosts share it)
        self._run_groups: dict[str, str] = {}
        self._run_groups_lock = threading.Lock()
        # CopyImage: the KMS key of each target region; a time-based copy's duration
        self.kms_key_ids = dict(options.kms_key_ids or {})
        self.time_bound_copy_minutes = options.time_bound_copy_minutes
        # (source AMI, region) -> the copy CopyImage answered in this process
        self.copy_ids: dict[tuple[str, str], str] = {}
        # validation instances launch into this capacity reservation / Capacity Block
        self.capacity_reservation_id = options.capacity_reservation_id
        self.capacity_block = options.capacity_block

    # -- images ------------------------------------------------------------------
    def _image(self, raw: ImageTypeDef, region: str) -> CloudImage:
        state = str(raw.get("State", ""))
        if raw.get("DeprecationTime") and state == "available":
            deprecated_at = parse_time(raw["DeprecationTime"])
            if deprecated_at and deprecated_at <= utcnow():
                state = "deprecated"
        return CloudImage(
            cloud="aws",
            region=region,
            image_id=str(raw["ImageId"]),
            name=str(raw.get("Name", "")),
            state=state,
            tags=tag_dict(raw.get("Tags")),
            created_at=parse_time(raw.get("CreationDate")),
        )

    def image_identity(self, image: CloudImage) -> str:
        """``aws/<region>/<OwnerId>/<ami-id>``: an AMI id is regional; DescribeImages
        names the account that owns it."""
        raws = self.describe_images(image.region, ImageIds=[image.image_id])
        owner = str(raws[0].get("OwnerId") or "") if raws else ""
        if not owner:
            raise CloudError(
                f"AMI {image.image_id} is not in {image.region} (DescribeImages found no "
                "owner): its full identity cannot be signed"
            )
        return ImageRef("aws", image.image_id, image.region, owner).text()

    def describe_images(self, region: str, **kwargs: Any) -> list[ImageTypeDef]:
        """Every page of ``DescribeImages`` (``NextToken``) for a filtered query."""
        found: list[ImageTypeDef] = []
        paginator = self.clients.ec2(region).get_paginator("describe_images")
        for page in paginator.paginate(**kwargs):
            found.extend(page.get("Images", []))
        return found

    def query_images(self, query: ImageQuery) -> list[CloudImage]:
        filters = []
        for key, value in query.tag_values():
            if value is not None:
                filters.append({"Name": f"tag:{key}", "Values": [value]})
        if not filters:
            filters.append({"Name": "tag-key", "Values": [TAG_STACK]})
        found: list[CloudImage] = []
        for reg in [query.region] if query.region else self.regions:
            raws = self.describe_images(
                reg, Owners=["self"], Filters=filters, IncludeDeprecated=True
            )
            found.extend(self._image(raw, reg) for raw in raws)
        return sorted(
            found,
            key=lambda i: (
                i.created_at or dt.datetime.min.replace(tzinfo=dt.timezone.utc),
                i.image_id,
            ),
        )

    def get_image(self, image_id: str, region: str) -> CloudImage | None:
        from botocore.exceptions import ClientError

        try:
            resp = self.clients.ec2(region).describe_images(
                ImageIds=[image_id], IncludeDeprecated=True
            )
        except ClientError as exc:
            if error_code(exc).startswith("InvalidAMIID"):
                return None
            raise
        images = resp["Images"]
        return self._image(images[0], region) if images else None

    def newest_base_image(self, resolved: ResolvedStack) -> BaseImage:
        """``DescribeImages`` with the stack's owner and name filter in the build region,
        as Packer's ``source_ami_filter`` asked it (HVM, EBS root, available; the stack's
        architecture), the most recent ``CreationDate`` first (ties: the larger id)."""
        settings = SPEC.settings(resolved.stack)
        base = settings.base_image
        region = settings.build.region
        arch = {"x86_64": "x86_64", "aarch64": "arm64"}[resolved.stack.os.arch]
        raws = self.describe_images(
            region,
            Owners=[base.owner],
            Filters=[
                {"Name": "name", "Values": [base.name]},
                {"Name": "virtualization-type", "Values": ["hvm"]},
                {"Name": "root-device-type", "Values": ["ebs"]},
                {"Name": "state", "Values": ["available"]},
                {"Name": "architecture", "Values": [arch]},
            ],
        )
        query = SPEC.base_image_query(settings)
        if not raws:
            raise UserError(
                f"no AMI in {region} matches the base image of stack {resolved.name} "
                f"({query}, {arch}, HVM, EBS root, available)",
                hint=f"Check clouds.aws.base_image, or pin an AMI with "
                f"{SPEC.base_image_pin_field()}",
            )
        newest = max(raws, key=lambda r: (parse_time(r.get("CreationDate")) or utcnow(),
                                          str(r["ImageId"])))  # fmt: skip
        return BaseImage(
            cloud="aws",
            id=str(newest["ImageId"]),
            name=str(newest.get("Name", "")),
            created_at=parse_time(newest.get("CreationDate")),
            query=query,
        )

    def _snapshots(self, image_id: str, region: str) -> list[str]:
        resp = self.clients.ec2(region).describe_images(ImageIds=[image_id], IncludeDeprecated=True)
        return [
            str(m["Ebs"]["SnapshotId"])
            for raw in resp["Images"]
            for m in raw.get("BlockDeviceMappings", [])
            if m.get("Ebs", {}).get("SnapshotId")
        ]

    def set_tags(self, image: CloudImage, tags: dict[str, str]) -> None:
        self.clients.ec2(image.region).create_tags(
            Resources=[image.image_id],
            Tags=[{"Key": k, "Value": str(v)} for k, v in tags.items()],
        )

    # -- instances ---------------------------------------------------------------------
    def candidate_locations(self, image: CloudImage) -> list[str]:
        """The Availability Zones of the image's region, in name order; with a subnet,
        only the subnet's zone (a subnet lives in one zone: EC2 refuses a placement in
        another, so falling back to other zones would only collect refusals)."""
        if self.capacity_reservation_id:  # a reservation lives in one zone
            found = self.clients.ec2(image.region).describe_capacity_reservations(
                CapacityReservationIds=[self.capacity_reservation_id]
            )["CapacityReservations"]
            return [str(found[0]["AvailabilityZone"])]
        if self.subnet_id:
            subnets = self.clients.ec2(image.region).describe_subnets(SubnetIds=[self.subnet_id])
            return [str(subnets["Subnets"][0]["AvailabilityZone"])]
        zones = self.clients.ec2(image.region).describe_availability_zones(
            Filters=[{"Name": "state", "Values": ["available"]}]
        )["AvailabilityZones"]
        return sorted(str(z["ZoneName"]) for z in zones)

    def launch(self, request: LaunchRequest) -> Instance:
        from botocore.exceptions import ClientError

        region = region_of(request.location)
        ec2 = self.clients.ec2(region)
        tags = launch_tags(request)
        name = f"imagectl-{request.stack}-{int(time.time() * 1000) % 10**10}"
        # EFA shapes: one EFA interface per network card (efa.yaml)
        cards = efa_cards(request.shape)
        group_id = self._launch_group(
            ec2, name=name, placement=request.placement, allowed_cidr=request.allowed_cidr,
            tags=tags, members=bool(cards),
        )  # fmt: skip
        kwargs: dict[str, Any] = {
            "ImageId": request.image.image_id,
            "InstanceType": request.shape,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": _user_data(request.ssh_public_key),
            "SecurityGroupIds": [group_id],
            "InstanceInitiatedShutdownBehavior": "terminate",
            # IMDSv2 only, one hop: containers on the host cannot reach the metadata.
            "MetadataOptions": {
                "HttpTokens": "required",
                "HttpEndpoint": "enabled",
                "HttpPutResponseHopLimit": 1,
            },
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tag_list({**tags, "Name": name})},
                {"ResourceType": "volume", "Tags": tag_list(tags)},
            ],
        }
        if request.location != region:
            kwargs["Placement"] = {"AvailabilityZone": request.location}
        if request.placement is not None:  # a cluster placement group (aws/placement.py)
            kwargs.setdefault("Placement", {})["GroupName"] = request.placement.resource_id
        if cards:  # the interfaces carry the group and the subnet (EC2 API, RunInstances)
            subnet = self.subnet_id or network.default_subnet(
                ec2, request.location if request.location != region else None
            )
            del kwargs["SecurityGroupIds"]
            kwargs["NetworkInterfaces"] = efa_interfaces(
                request.shape, group_id=group_id, subnet_id=subnet
            )
        elif self.subnet_id:
            kwargs["SubnetId"] = self.subnet_id
        if self.capacity_reservation_id:
            kwargs["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": self.capacity_reservation_id}
            }
            if self.capacity_block:
                kwargs["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        if self.instance_profile:  # only what validation needs (e.g. SSM), nothing else
            kwargs["IamInstanceProfile"] = {"Name": self.instance_profile}
        try:
            resp = ec2.run_instances(**kwargs)
        except ClientError as exc:
            # a run's shared group is its other hosts' too: left to them
            if request.placement is None:
                network.delete_group(ec2, group_id)
            where = request.location
            if self.capacity_reservation_id:  # "no capacity" names the reservation tried
                kind = "Capacity Block" if self.capacity_block else "capacity reservation"
                where = f"{request.location} ({kind} {self.capacity_reservation_id})"
            refused = (
                f"EC2 refused to launch {request.shape} from {request.image.image_id} in "
                f"{request.location}: {exc}"
            )
            raise launch_failure(exc, translate_launch_error(exc, where), refused) from exc
        raw = resp["Instances"][0]
        if cards > 1 and request.allowed_cidr:  # several interfaces: EC2 assigns no public address
            self._public.add(str(raw["InstanceId"]))
        return self._instance(raw, region)

    def _launch_group(
        self,
        ec2: EC2Client,
        *,
        name: str,
        placement: Placement | None,
        allowed_cidr: str | None,
        tags: dict[str, str],
        members: bool,
    ) -> str:
        """The instance's security group: SSH from the runner only. A multi-node run's hosts
        share one group, made by its first launch, that also admits all traffic among its
        members (the hosts reach each other; EFA requires it); an EFA shape's own group
        admits its members too. Each group is tagged like the instance, so terminate (the
        last host's) or reap deletes it."""
        vpc_id = network.vpc_of(ec2, self.subnet_id)
        if placement is None:
            group_id = network.create_group(
                ec2, name=name, vpc_id=vpc_id, allowed_cidr=allowed_cidr,
                tags={**tags, "Name": name},
            )  # fmt: skip
            if members:
                network.admit_members(ec2, group_id)
            return group_id
        with self._run_groups_lock:
            group_id = self._run_groups.get(placement.name) or ""
            if not group_id:
                group_name = f"{placement.name}-hosts"
                group_id = network.create_group(
                    ec2, name=group_name, vpc_id=vpc_id, allowed_cidr=allowed_cidr,
                    tags={**tags, "Name": group_name},
                )  # fmt: skip
                network.admit_members(ec2, group_id)
                self._run_groups[placement.name] = group_id
            return group_id

    def _instance(self, raw: InstanceTypeDef, region: str) -> Instance:
        zone = raw.get("Placement", {}).get("AvailabilityZone") or region
        return Instance(
            cloud="aws",
            region=str(zone),
            instance_id=str(raw["InstanceId"]),
            shape=str(raw.get("InstanceType", "")),
            image_id=str(raw.get("ImageId", "")),
            state=str(raw.get("State", {}).get("Name", "")),
            address=raw.get("PublicIpAddress") or raw.get("PrivateIpAddress"),
            tags=tag_dict(raw.get("Tags")),
            launched_at=raw.get("LaunchTime"),
            private_address=raw.get("PrivateIpAddress"),
        )

    def create_placement(
        self, *, name: str, location: str, shape: str, count: int, tags: dict[str, str]
    ) -> Placement | None:
        region = region_of(location)
        return aws_placement.create(self.clients.ec2(region), name=name, region=region, tags=tags)

    def delete_placement(self, placement: Placement) -> None:
        aws_placement.delete(self.clients.ec2(placement.location), placement)

    def list_placements(self) -> list[ManagedPlacement]:
        return [
            found
            for reg in self.regions
            for found in aws_placement.list_managed(self.clients.ec2(reg), reg)
        ]

    def _describe(self, instance: Instance) -> Instance | None:
        from botocore.exceptions import ClientError

        region = region_of(instance.region)
        try:
            resp = self.clients.ec2(region).describe_instances(InstanceIds=[instance.instance_id])
        except ClientError as exc:
            if error_code(exc).startswith("InvalidInstanceID"):
                return None
            raise
        for reservation in resp["Reservations"]:
            for raw in reservation["Instances"]:
                return self._instance(raw, region)
        return None

    def _reachability_passed(self, instance: Instance) -> bool:
        """EC2's own reachability status check; no status yet counts as not yet passed
        only while the instance is younger than the check's first report (~2 min)."""
        statuses = self.clients.ec2(region_of(instance.region)).describe_instance_status(
            InstanceIds=[instance.instance_id], IncludeAllInstances=True
        )["InstanceStatuses"]
        for status in statuses:
            for part in (status.get("InstanceStatus"), status.get("SystemStatus")):
                if part is not None and part.get("Status") == "impaired":
                    return False
        return True

    def wait_reachable(self, instance: Instance, *, timeout_s: float) -> Instance:
        deadline = time.monotonic() + timeout_s
        last = instance
        while True:
            current = self._describe(instance)
            if current is None or current.state in ("shutting-down", "terminated"):
                raise NotReachable(
                    instance.instance_id, f"the instance is {current.state if current else 'gone'}"
                )
            last = current
            if current.state == "running" and current.instance_id in self._public:
                # an EFA host with several interfaces: the runner reaches it at an Elastic
                # IP on its primary interface (aws/addresses.py)
                ec2 = self.clients.ec2(region_of(current.region))
                raw = ec2.describe_instances(InstanceIds=[current.instance_id])
                addresses.attach(ec2, raw["Reservations"][0]["Instances"][0])
                self._public.discard(current.instance_id)
                current = self._describe(instance) or current
            if current.state == "running" and self._reachability_passed(current):
                return current
            if time.monotonic() >= deadline:
                raise NotReachable(
                    instance.instance_id,
                    f"still '{last.state}' after {timeout_s:.0f} s",
                )
            time.sleep(self.poll_interval_s)

    def terminate(self, instance: Instance) -> None:
        """Terminate the instance, wait until it is ``terminated``, then delete its
        imagectl security group: EC2 refuses to delete a group while an instance that is
        still ``shutting-down`` uses it (``DependencyViolation``). A group whose instance
        does not end in time is left to ``imagectl reap`` (``reap_orphans``)."""
        from botocore.exceptions import ClientError

        region = region_of(instance.region)
        ec2 = self.clients.ec2(region)
        groups = self._group_ids(ec2, instance.instance_id)
        try:
            ec2.terminate_instances(InstanceIds=[instance.instance_id])
        except ClientError as exc:
            if not error_code(exc).startswith("InvalidInstanceID"):
                raise
        gone = self._wait_terminated(instance) if groups or efa_cards(instance.shape) > 1 else False
        if groups and gone:
            for group_id in groups:
                self._delete_group_if_managed(ec2, group_id)
        if efa_cards(instance.shape) > 1 and gone:  # its Elastic IP, if one was attached
            addresses.release_for(ec2, instance.instance_id)

    def _group_ids(self, ec2: EC2Client, instance_id: str) -> list[str]:
        from botocore.exceptions import ClientError

        try:
            resp = ec2.describe_instances(InstanceIds=[instance_id])
        except ClientError as exc:
            if error_code(exc).startswith("InvalidInstanceID"):
                return []
            raise
        found = [
            group_id
            for reservation in resp["Reservations"]
            for raw in reservation["Instances"]
            for group_id in _instance_groups(raw)
        ]
        return list(dict.fromkeys(found))

    def _wait_terminated(self, instance: Instance) -> bool:
        deadline = time.monotonic() + self.terminate_wait_s
        while True:
            current = self._describe(instance)
            if current is None or current.state == "terminated":
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll_interval_s)

    def _delete_group_if_managed(self, ec2: EC2Client, group_id: str) -> None:
        from botocore.exceptions import ClientError

        try:
            groups = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
        except ClientError as exc:
            if error_code(exc) == "InvalidGroup.NotFound":  # gone already (another host's)
                return
            raise
        if groups and tag_dict(groups[0].get("Tags")).get(TAG_MANAGED) == "true":
            network.delete_group(ec2, group_id)

    def reap_orphans(self, *, now: dt.datetime, dry_run: bool = False) -> list[Instance]:
        """imagectl's security groups whose TTL passed and that no instance uses any more
        (a runner killed before its clean-up, an instance slow to terminate): deleted, or
        listed with ``dry_run``. Returned as records of kind ``security-group``."""
        out: list[Instance] = []
        for reg in self.regions:
            ec2 = self.clients.ec2(reg)
            used = {
                group_id
                for page in ec2.get_paginator("describe_instances").paginate(
                    Filters=[
                        {"Name": "instance-state-name", "Values": [*LIVE_STATES, "shutting-down"]}
                    ]
                )
                for reservation in page["Reservations"]
                for raw in reservation["Instances"]
                for group_id in _instance_groups(raw)
            }
            pages = ec2.get_paginator("describe_security_groups").paginate(
                Filters=[{"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]}]
            )
            for page in pages:
                for group in page["SecurityGroups"]:
                    tags = tag_dict(group.get("Tags"))
                    expires = parse_time(tags.get(TAG_TTL))
                    if group["GroupId"] in used or expires is None or expires > now:
                        continue
                    record = Instance(
                        cloud="aws",
                        region=reg,
                        instance_id=str(group["GroupId"]),
                        shape="security-group",
                        image_id="",
                        tags=tags,
                    )
                    if not dry_run:
                        network.delete_group(ec2, record.instance_id)
                    out.append(record)
            for address in addresses.orphans(ec2, now):  # a killed run's Elastic IPs
                record = Instance(
                    cloud="aws",
                    region=reg,
                    instance_id=str(address["AllocationId"]),
                    shape="elastic-ip",
                    image_id="",
                    tags=tag_dict(address.get("Tags")),
                )
                if not dry_run:
                    addresses.release(ec2, record.instance_id)
                out.append(record)
        return out

    def list_instances(self, *, managed_only: bool = True) -> list[Instance]:
        filters: list[FilterTypeDef] = [{"Name": "instance-state-name", "Values": LIVE_STATES}]
        if managed_only:
            filters.append({"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]})
        found: list[Instance] = []
        for reg in self.regions:
            paginator = self.clients.ec2(reg).get_paginator("describe_instances")
            for page in paginator.paginate(Filters=filters):
                for reservation in page["Reservations"]:
                    found.extend(self._instance(raw, reg) for raw in reservation["Instances"])
        return found


def create_provider(options: AwsOptions) -> AwsProvider:
    return AwsProvider(options)
