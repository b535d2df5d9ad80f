"""EC2 and SSM behaviour that moto (5.2.5) lacks or softens, added at its protocol layer.

moto answers an action by calling the method of the same (snake_case) name on its
response class; these methods are added or replaced there, so boto3 talks to them over
moto's own request parsing and response serialization (botocore's ``service-2.json``
output shapes), in process (``mock_aws``) and through ``ThreadedMotoServer`` alike. Each
keeps the documented behaviour of the real API that the production code must cope with;
``CONTRACT`` lists, per operation, the request members read and the response members
written, and ``tests/contract/test_aws_contract.py`` checks them against botocore's
installed ``service-2.json``.

- ``EnableImageDeprecation(ImageId, DeprecateAt)`` / ``DisableImageDeprecation``: set or
  clear the AMI's ``DeprecationTime``; an unknown AMI is ``InvalidAMIID.NotFound``.
- ``CopyImage``: honours ``ClientToken`` ("Unique, case-sensitive identifier you provide
  to ensure idempotency of the request": the same token returns the same AMI, the same
  token with other parameters is ``IdempotentParameterMismatch``, EC2 API reference,
  "Ensuring idempotency") and ``TagSpecifications`` (``image`` and ``snapshot`` tags are
  applied with the copy, atomically; another ``ResourceType`` fails the request); the
  copy records ``SourceImageId`` / ``SourceImageRegion``, which ``DescribeImages``
  returns and its ``source-image-id`` / ``source-image-region`` filters match (the
  sandbox's ``add_source_image_filters``); ``BEHAVIOUR.drop_copy_tags`` loses the
  requested tags (an emulator such as plain moto does: the copy is found by what EC2
  records instead); the copy is ``pending`` for
  ``BEHAVIOUR.copy_pending_polls`` DescribeImages calls in its region, then ``available``
  or, for a region in ``BEHAVIOUR.fail_copies_into``, ``failed`` with a ``StateReason``.
- ``DeregisterImage(DeleteAssociatedSnapshots=True)`` deletes the AMI's snapshots with it
  (EC2 API reference, DeregisterImage); without it they stay, as on EC2.
- SSM ``PutParameter`` with ``DataType=aws:ec2:image`` is validated asynchronously: "a
  successful HTTP 200 response does not guarantee that your parameter was successfully
  created or updated [...] If you submit an invalid AMI value, the PutParameter
  operation will return success, but the asynchronous validation will fail and the
  parameter will not be created or updated" (SSM API reference, PutParameter,
  DataType). The value changes after ``BEHAVIOUR.ssm_validation_polls`` GetParameter
  calls, and only if the AMI exists and is ``available`` in that account and region.
  ``Tier``: an advanced parameter cannot go back to the standard tier ("You can't revert
  an advanced parameter to a standard parameter", Systems Manager User Guide, "Changing a
  standard parameter to an advanced parameter"): ``ValidationException``; without
  ``Tier`` an update keeps the parameter's tier.
- Placement groups (``CreatePlacementGroup`` / ``DeletePlacementGroup`` /
  ``DescribePlacementGroups``, which moto lacks): Strategy cluster | spread | partition,
  a duplicate name is ``InvalidPlacementGroup.Duplicate``; ``RunInstances`` naming an
  unknown ``Placement.GroupName`` is ``InvalidPlacementGroup.Unknown``, and an instance
  launched in a group reports it in ``Placement.GroupName`` (moto leaves it empty); a
  group whose instances are not all terminated cannot be deleted
  (``InvalidPlacementGroup.InUse``). ``DescribePlacementGroups`` answers every group at
  once (no paging in its API reference) and applies its documented ``Filters``
  (``group-name``, ``group-arn``, ``state``, ``strategy``, ``spread-level``,
  ``tag:<key>``, ``tag-key``); any other filter is ``InvalidParameterValue`` ("The filter
  '...' is invalid"). ``BEHAVIOUR.placement_in_use_race`` names groups whose next delete
  is refused ``InUse`` as if an instance had just been launched into them (the race
  between a listing and a delete).
- ``DescribeImages`` pages: ``BEHAVIOUR.images_page_size`` (or ``MaxResults``) images a
  page and a ``NextToken`` for the rest (EC2 API reference, "Pagination").
- ``TerminateInstances``: the instance is ``shutting-down`` for
  ``BEHAVIOUR.shutdown_polls`` DescribeInstances calls in its region, then ``terminated``.
- ``RunInstances`` with a ``SubnetId`` and a ``Placement.AvailabilityZone`` other than the
  subnet's is ``InvalidParameterValue`` (a subnet lives in one Availability Zone; EC2
  User Guide, "Subnets for your VPC").
- ``CreateCapacityReservation`` / ``DescribeCapacityReservations`` (moto has neither): a
  reservation of ``InstanceCount`` instances of one type in one zone, ``ReservationType``
  ``default`` or ``capacity-block``. ``RunInstances`` targeting one
  (``CapacityReservationSpecification.CapacityReservationTarget``) must match its type and
  zone, must say ``InstanceMarketOptions.MarketType=capacity-block`` for a Capacity Block,
  and fails ``ReservationCapacityExceeded`` when it has no instance left (EC2 API
  reference, "Error codes": "The requested reservation does not have sufficient
  compatible and available capacity for this request").
- An instance launched with several network interfaces gets no public IPv4 address (EC2
  User Guide, "Assign a public IPv4 address during instance launch").
- ``DeleteSecurityGroup`` of a group that a not yet ``terminated`` instance uses is
  ``DependencyViolation`` ("resource sg-... has a dependent object", as EC2 answers).
- Block public access for AMIs (moto has none of it): ``GetImageBlockPublicAccessState``
  answers ``block-new-sharing`` or ``unblocked`` per account and Region,
  ``EnableImageBlockPublicAccess`` / ``DisableImageBlockPublicAccess`` set it, and while it
  is ``block-new-sharing`` a ``ModifyImageAttribute`` that adds ``Group=all`` is refused
  ("This will block any attempt to publicly share your AMIs in the specified Region", EC2
  API reference, EnableImageBlockPublicAccess). The reference names no error code for the
  refusal: the emulator answers ``OperationNotPermitted``. The setting takes effect at
  once here (EC2: "up to 10 minutes").
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

# operation -> (request members read, response members written); checked against
# botocore's service-2.json by tests/contract/test_aws_contract.py.
CONTRACT: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("ec2", "EnableImageDeprecation"): (("ImageId", "DeprecateAt", "DryRun"), ("Return",)),
    ("ec2", "DisableImageDeprecation"): (("ImageId", "DryRun"), ("Return",)),
    ("ec2", "CopyImage"): (
        (
            "SourceImageId",
            "SourceRegion",
            "Name",
            "Description",
            "ClientToken",
            "TagSpecifications",
            "Encrypted",
            "KmsKeyId",
            "SnapshotCopyCompletionDurationMinutes",
            "DryRun",
        ),
        ("ImageId",),
    ),
    ("ec2", "DescribeImages"): (
        ("ImageIds", "Owners", "ExecutableUsers", "Filters", "MaxResults", "NextToken"),
        ("Images", "NextToken"),
    ),
    ("ec2", "DeregisterImage"): (("ImageId", "DeleteAssociatedSnapshots", "DryRun"), ("Return",)),
    ("ssm", "PutParameter"): (
        ("Name", "Value", "Type", "DataType", "Overwrite", "Description", "Tier"),
        ("Version", "Tier"),
    ),
    ("ssm", "GetParameter"): (("Name",), ("Parameter",)),
    ("ec2", "RunInstances"): (
        (
            "SubnetId",
            "Placement",
            "InstanceType",
            "CapacityReservationSpecification",
            "InstanceMarketOptions",
        ),
        ("Instances",),
    ),
    ("ec2", "CreatePlacementGroup"): (
        ("GroupName", "Strategy", "TagSpecifications", "DryRun"),
        ("PlacementGroup",),
    ),
    ("ec2", "DeletePlacementGroup"): (("GroupName", "DryRun"), ()),
    ("ec2", "DescribePlacementGroups"): (("GroupNames", "Filters"), ("PlacementGroups",)),
    ("ec2", "CreateCapacityReservation"): (
        ("InstanceType", "InstancePlatform", "AvailabilityZone", "InstanceCount"),
        ("CapacityReservation",),
    ),
    ("ec2", "DescribeCapacityReservations"): (
        ("CapacityReservationIds",),
        ("CapacityReservations",),
    ),
    ("ec2", "TerminateInstances"): (("InstanceIds", "DryRun"), ("TerminatingInstances",)),
    ("ec2", "DeleteSecurityGroup"): (("GroupId", "GroupName", "DryRun"), ("Return", "GroupId")),
    ("ec2", "GetImageBlockPublicAccessState"): (("DryRun",), ("ImageBlockPublicAccessState",)),
    ("ec2", "EnableImageBlockPublicAccess"): (
        ("ImageBlockPublicAccessState", "DryRun"),
        ("ImageBlockPublicAccessState",),
    ),
    ("ec2", "DisableImageBlockPublicAccess"): (("DryRun",), ("ImageBlockPublicAccessState",)),
    ("ec2", "ModifyImageAttribute"): (("ImageId", "LaunchPermission"), ()),
}
# The AMI members the emulator sets that DescribeImages returns (checked likewise).
RESERVATION_MEMBERS = (
    "CapacityReservationId",
    "InstanceType",
    "InstancePlatform",
    "AvailabilityZone",
    "TotalInstanceCount",
    "AvailableInstanceCount",
    "State",
    "ReservationType",
)
IMAGE_MEMBERS = ("State", "StateReason", "DeprecationTime", "SourceImageId", "SourceImageRegion")


@dataclass
class Behaviour:
    """How strict the emulator is; tests change it and ``reset()`` restores the default."""

    copy_pending_polls: int = 2
    # DescribeImages answers at most this many images a page (NextToken for the rest), or
    # MaxResults when the request sets it; EC2's own limit is 1000 a page
    images_page_size: int = 1000
    ssm_validation_polls: int = 1
    shutdown_polls: int = 2
    fail_copies_into: set[str] = field(default_factory=set)
    drop_copy_tags: bool = False  # a fault: CopyImage's TagSpecifications do not arrive
    # internal state
    tokens: dict[tuple[str, str, str], tuple[str, tuple[Any, ...]]] = field(default_factory=dict)
    pending: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)
    parameters: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)
    shutting: dict[tuple[str, str, str], int] = field(default_factory=dict)
    copies: dict[str, dict[str, Any]] = field(default_factory=dict)  # how each copy was asked
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (account, region, name) -> the placement group, and instance id -> its group's key
    placement_groups: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    placed: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # group names whose next DeletePlacementGroup is refused InUse (a launch raced it)
    placement_in_use_race: set[str] = field(default_factory=set)
    # (account, region) where block public access for AMIs is block-new-sharing
    blocked_public: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def reset(self) -> None:
        fresh = Behaviour()
        for name in (
            "copy_pending_polls",
            "images_page_size",
            "ssm_validation_polls",
            "shutdown_polls",
            "fail_copies_into",
            "drop_copy_tags",
        ):
            setattr(self, name, getattr(fresh, name))
        self.tokens.clear()
        self.pending.clear()
        self.parameters.clear()
        self.shutting.clear()
        self.copies.clear()
        self.reservations.clear()
        self.blocked_public.clear()
        self.placement_groups.clear()
        self.placed.clear()
        self.placement_in_use_race.clear()


BEHAVIOUR = Behaviour()


def _advance_copies(backend: Any) -> None:
    """One DescribeImages in this region: pending copies move one poll on."""
    key_prefix = (backend.account_id, backend.region_name)
    with BEHAVIOUR.lock:
        for key, entry in list(BEHAVIOUR.pending.items()):
            if key[:2] != key_prefix:
                continue
            ami = backend.amis.get(key[2])
            if ami is None:
                BEHAVIOUR.pending.pop(key)
                continue
            entry[0] -= 1
            if entry[0] > 0:
                continue
            BEHAVIOUR.pending.pop(key)
            if entry[1]:
                ami.state = "failed"
                ami.state_reason = {
                    "Code": "Server.InternalError",
                    "Message": "Copy of the snapshot failed (emulated)",
                }
            else:
                ami.state = "available"


def _advance_shutdowns(backend: Any) -> None:
    """One DescribeInstances in this region: shutting-down instances move one poll on."""
    with BEHAVIOUR.lock:
        for key, left in list(BEHAVIOUR.shutting.items()):
            if key[:2] != (backend.account_id, backend.region_name):
                continue
            if left > 1:
                BEHAVIOUR.shutting[key] = left - 1
                continue
            BEHAVIOUR.shutting.pop(key)
            for inst in backend.all_instances():
                if inst.id == key[2]:
                    inst._state.name, inst._state.code = "terminated", 48


def _take_reservation(response: Any, rid: str, zone: str | None) -> None:
    """RunInstances into capacity reservation ``rid``: EC2's checks, then one instance
    of it taken."""
    from moto.ec2.exceptions import EC2ClientError

    with BEHAVIOUR.lock:
        res = BEHAVIOUR.reservations.get(rid)
        if res is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{rid}' does not exist",
            )
        shape = response._get_param("InstanceType")
        if shape != res["InstanceType"] or (zone and zone != res["AvailabilityZone"]):
            raise EC2ClientError(
                "InvalidParameterCombination",
                f"The instance type or Availability Zone does not match capacity "
                f"reservation {rid} ({res['InstanceType']} in {res['AvailabilityZone']})",
            )
        market = response._get_param("InstanceMarketOptions.MarketType")
        if res["ReservationType"] == "capacity-block" and market != "capacity-block":
            raise EC2ClientError(
                "InvalidParameterValue",
                f"{rid} is a Capacity Block: launch with InstanceMarketOptions "
                "MarketType capacity-block",
            )
        if res["AvailableInstanceCount"] < 1:
            raise EC2ClientError(
                "ReservationCapacityExceeded",
                "The requested reservation does not have sufficient compatible and available "
                "capacity for this request.",
            )
        res["AvailableInstanceCount"] -= 1


def install() -> None:
    """Add the calls to moto's EC2 and SSM responses (idempotent)."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses.amis import AmisResponse
    from moto.ec2.responses.instances import InstanceResponse
    from moto.ec2.responses.security_groups import SecurityGroups
    from moto.ssm.responses import SimpleSystemManagerResponse

    from imagectl.clouds.aws.sandbox import (
        add_source_image_filters,
        copied_before,
        copy_tags,
        new_copy,
    )

    if getattr(AmisResponse, "_imagectl_extended", False):
        return
    add_source_image_filters()

    def register_image(self: Any) -> ActionResult:
        """RegisterImage keeping what moto drops (EC2 API reference, RegisterImage):
        Architecture (default i386 for an EBS-backed AMI), VirtualizationType (default
        paravirtual) and an EBS root (the root device named in BlockDeviceMappings), so
        DescribeImages' architecture, virtualization-type and root-device-type filters
        judge a registered base image as EC2 does."""
        self.error_on_dryrun()
        image = self.ec2_backend.register_image(
            self._get_param("Name"), self._get_param("Description", "")
        )
        arch = self._get_param("Architecture") or "i386"
        if arch not in ("i386", "x86_64", "arm64", "x86_64_mac", "arm64_mac"):
            raise EC2ClientError("InvalidParameterValue", f"Invalid architecture: {arch}")
        image.architecture = arch
        image.virtualization_type = self._get_param("VirtualizationType") or "paravirtual"
        root = self._get_param("RootDeviceName")
        if root:
            image.root_device_name = root
            image.root_device_type = "ebs"
        return ActionResult({"ImageId": image.id})

    def enable_image_deprecation(self: Any) -> ActionResult:
        ami_id = self._get_param("ImageId")
        when = self._get_param("DeprecateAt")
        self.error_on_dryrun()
        (ami,) = self.ec2_backend.describe_images(ami_ids=[ami_id])  # NotFound for unknown
        ami.deprecation_time = when
        return ActionResult({"Return": True})

    def disable_image_deprecation(self: Any) -> ActionResult:
        ami_id = self._get_param("ImageId")
        self.error_on_dryrun()
        (ami,) = self.ec2_backend.describe_images(ami_ids=[ami_id])
        ami.deprecation_time = None
        return ActionResult({"Return": True})

    def _bpa_key(self: Any) -> tuple[str, str]:
        return (self.ec2_backend.account_id, self.ec2_backend.region_name)

    def get_image_block_public_access_state(self: Any) -> ActionResult:
        self.error_on_dryrun()
        blocked = _bpa_key(self) in BEHAVIOUR.blocked_public
        state = "block-new-sharing" if blocked else "unblocked"
        return ActionResult({"ImageBlockPublicAccessState": state})

    def enable_image_block_public_access(self: Any) -> ActionResult:
        state = self._get_param("ImageBlockPublicAccessState")
        self.error_on_dryrun()
        if state != "block-new-sharing":
            raise EC2ClientError(
                "InvalidParameterValue", f"ImageBlockPublicAccessState {state} is not valid"
            )
        BEHAVIOUR.blocked_public.add(_bpa_key(self))
        return ActionResult({"ImageBlockPublicAccessState": state})

    def disable_image_block_public_access(self: Any) -> ActionResult:
        self.error_on_dryrun()
        BEHAVIOUR.blocked_public.discard(_bpa_key(self))
        return ActionResult({"ImageBlockPublicAccessState": "unblocked"})

    original_modify_image_attribute = AmisResponse.modify_image_attribute

    def modify_image_attribute(self: Any) -> Any:
        adds = (self._get_param("LaunchPermission", {}) or {}).get("Add", []) or []
        public = any(a.get("Group") == "all" for a in adds) or (
            self._get_param("OperationType") == "add"
            and "all" in (self._get_param("UserGroups", []) or [])
        )
        if public and _bpa_key(self) in BEHAVIOUR.blocked_public:
            raise EC2ClientError(
                "OperationNotPermitted",
                "Block public access for AMIs is enabled in this Region "
                "(ImageBlockPublicAccessState block-new-sharing): the AMI cannot be made public",
            )
        return original_modify_image_attribute(self)

    def copy_image(self: Any) -> ActionResult:
        backend = self.ec2_backend
        source_id = self._get_param("SourceImageId")
        source_region = self._get_param("SourceRegion")
        name = self._get_param("Name")
        description = self._get_param("Description")
        token = self._get_param("ClientToken")
        tags = copy_tags(self._get_param("TagSpecifications", []) or [])
        encrypted = bool(self._get_param("Encrypted", False))
        kms_key = self._get_param("KmsKeyId")
        duration = self._get_param("SnapshotCopyCompletionDurationMinutes")
        self.error_on_dryrun()
        if kms_key and not encrypted:  # EC2: KmsKeyId needs Encrypted
            raise EC2ClientError(
                "InvalidParameterCombination", "KmsKeyId requires Encrypted to be true"
            )
        signature = (source_id, source_region, name, description, kms_key, duration)
        with BEHAVIOUR.lock:
            key = (backend.account_id, backend.region_name, token or "")
            earlier = copied_before(BEHAVIOUR.tokens, key, signature)
            if earlier:
                return ActionResult({"ImageId": earlier})
            ami = new_copy(backend, source_id, source_region, name, description,
                           {} if BEHAVIOUR.drop_copy_tags else tags)  # fmt: skip
            BEHAVIOUR.copies[ami.id] = {"KmsKeyId": kms_key, "Duration": duration}
            if BEHAVIOUR.copy_pending_polls > 0 or backend.region_name in (
                BEHAVIOUR.fail_copies_into
            ):
                ami.state = "pending"
                BEHAVIOUR.pending[(backend.account_id, backend.region_name, ami.id)] = [
                    max(1, BEHAVIOUR.copy_pending_polls),
                    backend.region_name in BEHAVIOUR.fail_copies_into,
                ]
            if token:
                BEHAVIOUR.tokens[key] = (ami.id, signature)
        return ActionResult({"ImageId": ami.id})

    def describe_images(self: Any) -> Any:
        _advance_copies(self.ec2_backend)
        self.error_on_dryrun()
        images = self.ec2_backend.describe_images(
            ami_ids=self._get_param("ImageIds", []),
            filters=self._filters_from_querystring(),
            exec_users=self._get_param("ExecutableUsers", []),
            owners=self._get_param("Owners", []),
        )
        size = int(self._get_param("MaxResults") or BEHAVIOUR.images_page_size)
        start = int(self._get_param("NextToken") or 0)
        body: dict[str, Any] = {"Images": images[start : start + size]}
        if start + size < len(images):  # "NextToken: the token to include in another
            body["NextToken"] = str(start + size)  # request to get the next page"
        return ActionResult(body)

    def deregister_image(self: Any) -> ActionResult:
        backend = self.ec2_backend
        ami_id = self._get_param("ImageId")
        with_snapshots = self._get_param("DeleteAssociatedSnapshots", False)
        self.error_on_dryrun()
        ami = backend.amis.get(ami_id)
        backend.deregister_image(ami_id)  # InvalidAMIID.* as moto raises it
        if with_snapshots and ami is not None:
            snapshot = getattr(ami, "ebs_snapshot", None)
            if snapshot is not None and snapshot.id in backend.snapshots:
                backend.delete_snapshot(snapshot.id)
        return ActionResult({"Return": True})

    original_put = SimpleSystemManagerResponse.put_parameter
    original_get = SimpleSystemManagerResponse.get_parameter

    def put_parameter(self: Any) -> Any:
        if self._get_param("DataType", "text") != "aws:ec2:image":
            return original_put(self)
        from moto.ssm.exceptions import ValidationException

        name = self._get_param("Name")
        current = self.ssm_backend.get_parameter(name)
        version = (current.version if current is not None else 0) + 1
        have = getattr(current, "tier", None) or "Standard"
        tier = self._get_param("Tier") or have
        if have == "Advanced" and tier == "Standard":
            raise ValidationException(
                f"Parameter {name} is an advanced parameter: it can't be changed to a "
                "standard parameter."
            )
        with BEHAVIOUR.lock:
            key = (self.current_account, self.region, name)
            BEHAVIOUR.parameters[key] = [max(0, BEHAVIOUR.ssm_validation_polls), self]
        return ActionResult({"Version": version, "Tier": tier})

    def get_parameter(self: Any) -> Any:
        name = self._get_param("Name")
        with BEHAVIOUR.lock:
            key = (self.current_account, self.region, name)
            entry = BEHAVIOUR.parameters.get(key)
            if entry is not None:
                entry[0] -= 1
                if entry[0] < 0:  # N reads saw the old value; validation is over
                    BEHAVIOUR.parameters.pop(key)
                    if _image_valid(entry[1]):
                        original_put(entry[1])
        return original_get(self)

    original_run = InstanceResponse.run_instances

    def run_instances(self: Any) -> Any:
        subnet_id = self._get_param("SubnetId")
        zone = self._get_param("Placement.AvailabilityZone")
        target = self._get_param(
            "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
        )
        if target:
            _take_reservation(self, target, zone)
        group = self._get_param("Placement.GroupName")
        key = (self.ec2_backend.account_id, self.ec2_backend.region_name, group)
        if group and key not in BEHAVIOUR.placement_groups:
            raise EC2ClientError(
                "InvalidPlacementGroup.Unknown", f"The Placement Group '{group}' is unknown."
            )
        if subnet_id and zone:
            subnet = self.ec2_backend.get_subnet(subnet_id)
            if subnet.availability_zone != zone:
                raise EC2ClientError(
                    "InvalidParameterValue",
                    f"Value ({zone}) for parameter availabilityZone is invalid. Subnet "
                    f"'{subnet_id}' is in the availability zone {subnet.availability_zone}",
                )
        several = len(self._get_param("NetworkInterfaces", []) or []) > 1
        before = {i.id for i in self.ec2_backend.all_instances()} if group or several else set()
        result = original_run(self)
        if several:
            # "You can't auto-assign a public IPv4 address if you specify more than one
            # network interface" (EC2 User Guide): moto assigns one anyway
            new = {i.id for i in self.ec2_backend.all_instances()} - before
            for inst in self.ec2_backend.get_multi_instances_by_id(list(new)):
                for nic in inst.nics.values():
                    nic.public_ip = None
        if group:
            ids = {i.id for i in self.ec2_backend.all_instances()} - before
            with BEHAVIOUR.lock:
                BEHAVIOUR.placed.update({i: key for i in ids})
            for inst in self.ec2_backend.get_multi_instances_by_id(list(ids)):
                inst.placement.group_name = group  # DescribeInstances' Placement.GroupName
        return result

    # Placement groups (EC2 API reference: CreatePlacementGroup, DeletePlacementGroup,
    # DescribePlacementGroups; "Placement groups": a group holding running instances
    # cannot be deleted; Strategy cluster | spread | partition)
    def create_placement_group(self: Any) -> ActionResult:
        self.error_on_dryrun()
        name, strategy = self._get_param("GroupName"), self._get_param("Strategy")
        if strategy not in ("cluster", "spread", "partition"):
            raise EC2ClientError("InvalidParameterValue", f"Invalid strategy: {strategy}")
        key = (self.ec2_backend.account_id, self.ec2_backend.region_name, name)
        if key in BEHAVIOUR.placement_groups:
            raise EC2ClientError(
                "InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists."
            )
        tags = [t for spec in self._get_param("TagSpecifications", []) or []
                for t in spec.get("Tag", spec.get("Tags", [])) or []]  # fmt: skip
        group_id = f"pg-{secrets.token_hex(9)[:17]}"
        arn = f"arn:aws:ec2:{key[1]}:{key[0]}:placement-group/{name}"
        body = {"GroupName": name, "Strategy": strategy, "State": "available",
                "GroupId": group_id, "GroupArn": arn, "Tags": tags}  # fmt: skip
        BEHAVIOUR.placement_groups[key] = body
        return ActionResult({"PlacementGroup": dict(body)})

    def delete_placement_group(self: Any) -> ActionResult:
        self.error_on_dryrun()
        name = self._get_param("GroupName")
        key = (self.ec2_backend.account_id, self.ec2_backend.region_name, name)
        if key not in BEHAVIOUR.placement_groups:
            raise EC2ClientError(
                "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
            )
        members = [i for i, k in BEHAVIOUR.placed.items() if k == key]
        live = [i.id for i in self.ec2_backend.get_multi_instances_by_id(members)
                if i._state.name != "terminated"]  # fmt: skip
        if name in BEHAVIOUR.placement_in_use_race:
            BEHAVIOUR.placement_in_use_race.discard(name)
            live = live or ["i-launched-meanwhile"]
        if live:
            raise EC2ClientError(
                "InvalidPlacementGroup.InUse",
                f"There are instances in the placement group '{name}': {', '.join(live)}",
            )
        BEHAVIOUR.placement_groups.pop(key)
        return ActionResult({})

    def describe_placement_groups(self: Any) -> ActionResult:
        prefix = (self.ec2_backend.account_id, self.ec2_backend.region_name)
        names = self._get_param("GroupNames", []) or []
        filters = _filters(self._get_param("Filters", []) or [])
        found = [dict(g) for k, g in BEHAVIOUR.placement_groups.items()
                 if k[:2] == prefix and (not names or k[2] in names)
                 and all(_group_matches(g, f, values) for f, values in filters)]  # fmt: skip
        return ActionResult({"PlacementGroups": found})

    InstanceResponse.create_placement_group = create_placement_group  # type: ignore[attr-defined]
    InstanceResponse.delete_placement_group = delete_placement_group  # type: ignore[attr-defined]
    InstanceResponse.describe_placement_groups = describe_placement_groups  # type: ignore[attr-defined]

    def create_capacity_reservation(self: Any) -> ActionResult:
        self.error_on_dryrun()
        rid = f"cr-{secrets.token_hex(9)[:17]}"
        body = {
            "CapacityReservationId": rid,
            "OwnerId": self.ec2_backend.account_id,
            "InstanceType": self._get_param("InstanceType"),
            "InstancePlatform": self._get_param("InstancePlatform"),
            "AvailabilityZone": self._get_param("AvailabilityZone"),
            "TotalInstanceCount": int(self._get_param("InstanceCount")),
            "AvailableInstanceCount": int(self._get_param("InstanceCount")),
            "State": "active",
            "ReservationType": "default",
        }
        BEHAVIOUR.reservations[rid] = body
        return ActionResult({"CapacityReservation": dict(body)})

    def describe_capacity_reservations(self: Any) -> ActionResult:
        self.error_on_dryrun()
        ids = self._get_param("CapacityReservationIds", []) or list(BEHAVIOUR.reservations)
        missing = [i for i in ids if i not in BEHAVIOUR.reservations]
        if missing:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{missing[0]}' does not exist",
            )
        found = [dict(BEHAVIOUR.reservations[i]) for i in ids]
        return ActionResult({"CapacityReservations": found})

    InstanceResponse.create_capacity_reservation = create_capacity_reservation  # type: ignore[attr-defined]
    InstanceResponse.describe_capacity_reservations = describe_capacity_reservations  # type: ignore[attr-defined]

    original_terminate = InstanceResponse.terminate_instances
    original_describe_instances = InstanceResponse.describe_instances
    original_delete_group = SecurityGroups.delete_security_group

    def terminate_instances(self: Any) -> Any:
        result = original_terminate(self)
        backend = self.ec2_backend
        with BEHAVIOUR.lock:
            for inst in backend.get_multi_instances_by_id(self._get_param("InstanceIds", [])):
                if BEHAVIOUR.shutdown_polls > 0 and inst._state.name == "terminated":
                    key = (backend.account_id, backend.region_name, inst.id)
                    if key not in BEHAVIOUR.shutting:
                        inst._state.name, inst._state.code = "shutting-down", 32
                        BEHAVIOUR.shutting[key] = BEHAVIOUR.shutdown_polls
        return result

    def describe_instances(self: Any) -> Any:
        _advance_shutdowns(self.ec2_backend)
        return original_describe_instances(self)

    def delete_security_group(self: Any) -> Any:
        group_id = self._get_param("GroupId")
        if group_id:
            for inst in self.ec2_backend.all_instances():
                if inst._state.name == "terminated":
                    continue
                # the instance's groups and its interfaces' (an EFA launch names its groups
                # per interface, which moto keeps on the interfaces only)
                groups = list(inst.security_groups or []) + [
                    g for nic in getattr(inst, "nics", {}).values() for g in nic.group_set or []
                ]
                if any(getattr(g, "id", g) == group_id for g in groups):
                    raise EC2ClientError(
                        "DependencyViolation", f"resource {group_id} has a dependent object"
                    )
        return original_delete_group(self)

    InstanceResponse.run_instances = run_instances  # type: ignore[method-assign]
    InstanceResponse.terminate_instances = terminate_instances  # type: ignore[method-assign]
    InstanceResponse.describe_instances = describe_instances  # type: ignore[method-assign]
    SecurityGroups.delete_security_group = delete_security_group  # type: ignore[method-assign]
    AmisResponse.enable_image_deprecation = enable_image_deprecation  # type: ignore[attr-defined]
    AmisResponse.disable_image_deprecation = disable_image_deprecation  # type: ignore[attr-defined]
    AmisResponse.copy_image = copy_image  # type: ignore[method-assign]
    AmisResponse.get_image_block_public_access_state = get_image_block_public_access_state  # type: ignore[attr-defined]
    AmisResponse.enable_image_block_public_access = enable_image_block_public_access  # type: ignore[attr-defined]
    AmisResponse.disable_image_block_public_access = disable_image_block_public_access  # type: ignore[attr-defined]
    AmisResponse.modify_image_attribute = modify_image_attribute  # type: ignore[method-assign]
    AmisResponse.describe_images = describe_images  # type: ignore[method-assign]
    AmisResponse.deregister_image = deregister_image  # type: ignore[method-assign]
    AmisResponse.register_image = register_image  # type: ignore[method-assign]
    SimpleSystemManagerResponse.put_parameter = put_parameter  # type: ignore[method-assign]
    SimpleSystemManagerResponse.get_parameter = get_parameter  # type: ignore[method-assign]
    AmisResponse._imagectl_extended = True  # type: ignore[attr-defined]


PLACEMENT_GROUP_FILTERS = {
    "group-name": "GroupName",
    "group-arn": "GroupArn",
    "state": "State",
    "strategy": "Strategy",
    "spread-level": "SpreadLevel",
}


def _filters(raw: list[Any]) -> list[tuple[str, list[str]]]:
    """(name, values) of a request's ``Filters`` (moto's parsing gives ``Value`` or
    ``Values`` as a list)."""
    out = []
    for f in raw:
        values = f.get("Values", f.get("Value", [])) or []
        out.append((str(f.get("Name")), [str(v) for v in values]))
    return out


def _group_matches(group: dict[str, Any], name: str, values: list[str]) -> bool:
    """EC2's placement group filters (DescribePlacementGroups, Filters): a filter matches
    when the group's value is one of the filter's values."""
    from moto.ec2.exceptions import EC2ClientError

    tags = {t.get("Key"): t.get("Value") for t in group.get("Tags") or []}
    if name.startswith("tag:"):
        return tags.get(name[4:]) in values
    if name == "tag-key":
        return any(k in values for k in tags)
    if name not in PLACEMENT_GROUP_FILTERS:
        raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
    return str(group.get(PLACEMENT_GROUP_FILTERS[name], "")) in values


def _image_valid(put_response: Any) -> bool:
    """Is the AMI of a pending ``aws:ec2:image`` put available in its account and region?"""
    from moto.ec2.models import ec2_backends

    value = put_response._get_param("Value")
    backend = ec2_backends[put_response.current_account][put_response.region]
    ami = backend.amis.get(value)
    return ami is not None and ami.state == "available"
