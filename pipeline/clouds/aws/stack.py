"""AWS's section of a stack file (``clouds.aws``): the base AMI, the build instance,
the latest pointer's SSM parameter, the copies' KMS keys and the validation capacity, the
patterns of AWS's resource names, and the check of its region names. Registered with the
stack schema through ``SECTION`` (``imagectl.stacks.sections``).

Sources of the patterns: AMI names, Amazon EC2 API Reference, CreateImage "Name" (letters,
numbers, ( ) [ ] space . / - ' @ _; here without space and quote), filters add ``*`` and
``?``; AMI and subnet ids, the EC2 API reference (``ami-``/``subnet-`` and 8 or 17 hex
digits); SSM parameter names, Systems Manager API reference, PutParameter "Name".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator

from imagectl.clouds.aws.pointers import problems as pointer_problems
from imagectl.stacks.findings import Finding
from imagectl.stacks.locations import Loc, cloud_locations, target_regions, unknown_locations
from imagectl.stacks.patterns import LinuxUser, Region, ShapeName, pattern
from imagectl.stacks.schema import CloudCommon, Strict, UnsetNotWritten
from imagectl.stacks.sections import CloudSection

AwsOwner = Annotated[str, pattern(r"^([0-9]{12}|amazon|aws-marketplace|self)$", 20)]
AmiNameFilter = Annotated[str, pattern(r"^[A-Za-z0-9()\[\]./@_*?-]{3,128}$", 128)]
AwsSubnet = Annotated[str, pattern(r"^subnet-[0-9a-f]{8,17}$", 24)]
AmiId = Annotated[str, pattern(r"^ami-[0-9a-f]{8,17}$", 21)]  # EC2 API: ami-<8 or 17 hex>
SsmPrefix = Annotated[str, pattern(r"^(/[A-Za-z0-9_.-]+)+$", 200)]


class AwsBaseImage(UnsetNotWritten):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("login_user", "id")

    owner: AwsOwner
    name: AmiNameFilter = Field(
        description="AMI name filter, e.g. ubuntu/images/hvm-ssd/ubuntu-jammy-*"
    )
    login_user: LinuxUser | None = Field(
        None,
        description="the AMI's default user, who gets the instance's key pair; derived from "
        "a known owner (Canonical: ubuntu, Debian: admin, Amazon: ec2-user) when unset",
    )
    id: AmiId | None = Field(
        None,
        description="the base AMI pinned by id (in the build region); unset: plan and build "
        "resolve owner + name to the most recent match and record the id they used",
    )


class AwsBuild(Strict):
    region: Region
    instance_type: ShapeName
    subnet_id: AwsSubnet | None = None
    # the candidate's root EBS volume: the base AMI's 8 GiB cannot hold the CUDA toolkit
    root_volume_gb: int = Field(100, ge=8, le=16384, description="root volume size, GiB")


# A KMS key ARN or alias ARN (AWS KMS Developer Guide, "Key identifiers").
AwsKmsKey = Annotated[
    str,
    StringConstraints(
        pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:(key|alias)/[A-Za-z0-9/_-]{1,250}$",
        max_length=300,
    ),
]


class AwsCapacity(Strict):
    """Where validation instances come from when on-demand capacity is scarce (p5: rarely
    on demand): an On-Demand Capacity Reservation or a Capacity Block for ML."""

    reservation_id: Annotated[
        str, StringConstraints(pattern=r"^cr-[0-9a-f]{8,17}$", max_length=20)
    ] = Field(description="capacity reservation id (cr-...), an ODCR or a Capacity Block")
    capacity_block: bool = Field(
        False, description="a Capacity Block: launched with MarketType capacity-block"
    )


class AwsCloud(CloudCommon):
    SHARING: ClassVar[dict[str, str]] = {
        "principals": "AWS shares an AMI with accounts and organizations (ModifyImageAttribute "
        "LaunchPermission), not IAM principals; use share.accounts or share.organizations",
    }

    base_image: AwsBaseImage
    build: AwsBuild
    ssm_parameter_prefix: SsmPrefix = "/imagectl"
    # Advanced: the "latest" parameter can be shared with other accounts through AWS RAM
    # (Parameter Store shares advanced parameters only); an advanced parameter never goes
    # back to Standard
    ssm_parameter_tier: Literal["Standard", "Advanced"] = Field(
        "Standard", description="tier of the latest pointer's SSM parameter"
    )
    # CopyImage per target region: Encrypted + KmsKeyId (a copy shared with other
    # accounts must be encrypted with a customer managed key of that region that they
    # may use; absent: the account's default EBS encryption settings apply)
    kms_key_ids: dict[Region, AwsKmsKey] = Field(
        default_factory=dict, description="target region -> KMS key ARN for its copy"
    )
    # CopyImage SnapshotCopyCompletionDurationMinutes: a time-based copy (15 min steps,
    # 15 min to 48 h; EC2 API reference, CopyImage)
    time_bound_copy_minutes: int | None = Field(
        None, ge=15, le=2880, multiple_of=15, description="time-based AMI copy duration"
    )
    # validation instances launch into this reservation (its zone only)
    validation_capacity: AwsCapacity | None = None

    @model_validator(mode="after")
    def _pointer_parameters(self) -> AwsCloud:
        """Every pointer's SSM parameter (latest, canary) is a name PutParameter accepts,
        for any stack name (``imagectl.clouds.aws.pointers``)."""
        found = pointer_problems(self.ssm_parameter_prefix)
        if found:
            raise ValueError("ssm_parameter_prefix: " + "; ".join(found))
        return self

    @model_validator(mode="after")
    def _kms_keys_of_their_regions(self) -> AwsCloud:
        """A key per target (or build) region, of that region: CopyImage's ``KmsKeyId``
        "must exist in the destination Region", and KMS checks it only after the copy
        has started (EC2 API reference, CopyImage), so a wrong one fails hours later."""
        targets = [*self.regions, *([] if self.build.region in self.regions
                                    else [self.build.region])]  # fmt: skip
        for region, key in self.kms_key_ids.items():
            if region not in targets:
                raise ValueError(
                    f"kms_key_ids.{region}: {region} is not a target region "
                    f"({', '.join(targets)}): no copy is made there, so the key would never "
                    "be used; remove it or add the region to regions"
                )
            key_region = key.split(":")[3]
            if key_region != region:
                raise ValueError(
                    f"kms_key_ids.{region}: the key {key} is in {key_region}, not {region}: "
                    "CopyImage's KmsKeyId must exist in the destination Region (EC2 API "
                    f"reference, CopyImage); name a key of {region}"
                )
        return self


def location_findings(aws: AwsCloud, compat_dir: Path) -> Iterator[Finding]:
    """The build region, the target regions and the KMS keys' regions, against AWS's
    region codes (images/compat/regions.yaml ``aws.regions``)."""
    known = cloud_locations(compat_dir, "aws", "regions")
    names: list[tuple[Loc, str]] = [
        (("clouds", "aws", "build", "region"), aws.build.region),
        *target_regions("aws", aws.regions),
        *((("clouds", "aws", "kms_key_ids", r), r) for r in aws.kms_key_ids),
    ]
    regions = frozenset(known["regions"])
    yield from unknown_locations(names, "an AWS region", regions, known["source"])


SECTION = CloudSection(
    name="aws",
    model=AwsCloud,
    fabrics=frozenset({"efa"}),
    checks=(location_findings,),
    written_when_absent=True,
)
