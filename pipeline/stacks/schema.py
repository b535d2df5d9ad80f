"""The stack file schema: one YAML file per image stack, the single source of truth.

Every version an image carries is typed once here. Derived values (driver branch,
fabric manager version, DCGM package, package names) are computed by ``resolve.py``,
never written twice. Unknown keys, wrong types and impossible values are errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)

from imagectl.cloud_names import CLOUDS
from imagectl.core.errors import UserError
from imagectl.core.versions import Dotted, NcclVersion, driver_branch
from imagectl.stacks.patterns import (
    AmiId,
    AmiNameFilter,
    AwsOwner,
    AwsSubnet,
    AzureGroup,
    AzureGuid,
    AzureImageVersion,
    AzureLocation,
    AzureName,
    AzureReservationGroup,
    AzureVmSize,
    DebName,
    DebVersion,
    Description,
    GcpLabel,
    GcpProject,
    GcpReservation,
    GcpZone,
    GpuSku,
    KernelRelease,
    LinuxUser,
    MirrorUrl,
    Principal,
    Region,
    ShapeName,
    SsmPrefix,
    Version,
)

STACK_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,38}[a-z0-9]$")
_AWS_ACCOUNT = re.compile(r"^\d{12}$")
_ORG_ARN = re.compile(r"^arn:aws:organizations::\d{12}:(organization|ou)/[\w/-]+$")

Profile = Literal["boot", "quick", "full", "burn"]
T = TypeVar("T")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _checked(parse: Callable[[], T]) -> T:
    """Run a version parser once; its UserError becomes the ValueError pydantic reports."""
    try:
        return parse()
    except UserError as exc:
        raise ValueError(exc.render().rstrip(".")) from None


class OsPins(Strict):
    distro: Literal["ubuntu", "debian"]
    release: str = Field(description="22.04, 24.04 (Ubuntu) or 12 (Debian)")
    arch: Literal["x86_64", "aarch64"] = "x86_64"

    @field_validator("release", mode="before")
    @classmethod
    def _release(cls, v: object) -> str:
        return str(v)

    @model_validator(mode="after")
    def _known_release(self) -> OsPins:
        known = {"ubuntu": {"22.04", "24.04"}, "debian": {"12"}}
        if self.release not in known[self.distro]:
            raise ValueError(
                f"{self.distro} {self.release} is not supported; "
                f"use one of {sorted(known[self.distro])}"
            )
        return self

    @property
    def codename(self) -> str:
        return {"22.04": "jammy", "24.04": "noble", "12": "bookworm"}[self.release]

    @property
    def repo_slug(self) -> str:
        """NVIDIA's repository folder name: ubuntu2204, ubuntu2404, debian12."""
        return f"{self.distro}{self.release.replace('.', '')}"


class DriverPins(Strict):
    version: Version
    kernel_modules: Literal["open", "proprietary"]

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, v: str) -> str:
        if len(_checked(lambda: Dotted.parse(v, what="driver version")).parts) < 2:
            raise ValueError(f"driver version '{v}' must be exact, e.g. 580.95.05")
        return v

    @property
    def branch(self) -> int:
        return driver_branch(self.version)


class NvidiaPins(Strict):
    source: Literal["cuda-repo", "distro"] = Field(
        "cuda-repo",
        description="cuda-repo: NVIDIA's CUDA apt repository; distro: the OS archive",
    )
    driver: DriverPins
    fabric_manager: Literal["auto", "required", "none"] = Field(
        "auto",
        description="auto: installed when a target GPU sits on NVSwitch; version == driver",
    )
    cuda: Version
    nccl: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\+cuda[0-9]+\.[0-9]+$")
    dcgm: DebVersion | None = None
    container_toolkit: DebVersion | None = None

    @field_validator("cuda", mode="before")
    @classmethod
    def _cuda(cls, v: str) -> str:
        if len(_checked(lambda: Dotted.parse(str(v), what="CUDA version")).parts) < 2:
            raise ValueError(f"CUDA version '{v}' must name at least major.minor, e.g. 12.8.1")
        return str(v)

    @field_validator("nccl", mode="before")
    @classmethod
    def _nccl(cls, v: str | None) -> str | None:
        if v is not None:
            _checked(lambda: NcclVersion.parse(v))
        return v


class AwsEfa(Strict):
    installer: Version
    ofi_nccl: Version

    @field_validator("installer", "ofi_nccl", mode="before")
    @classmethod
    def _ver(cls, v: str) -> str:
        _checked(lambda: Dotted.parse(v, what="EFA version"))
        return v


class AzureInfiniband(Strict):
    doca_ofed: Version = Field(description="DOCA-OFED release, e.g. 3.1.0")
    peermem: bool = True


class NetworkPins(Strict):
    aws_efa: AwsEfa | None = None
    azure_infiniband: AzureInfiniband | None = None


class Sharing(Strict):
    accounts: list[str] = Field(default_factory=list, description="AWS account ids")
    organizations: list[str] = Field(default_factory=list, description="AWS org/OU ARNs")
    principals: list[Principal] = Field(default_factory=list, description="GCP/Azure principals")
    public: bool = False

    @field_validator("accounts")
    @classmethod
    def _accounts(cls, v: list[str]) -> list[str]:
        for acct in v:
            if not _AWS_ACCOUNT.match(str(acct)):
                raise ValueError(f"'{acct}' is not a 12-digit AWS account id")
        return [str(a) for a in v]

    @field_validator("organizations")
    @classmethod
    def _orgs(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not _ORG_ARN.match(arn):
                raise ValueError(f"'{arn}' is not an AWS organization or OU ARN")
        return v


class CloudCommon(Strict):
    # The sharing a cloud can apply to an image (its provider's ``share``), and why the
    # rest would be ignored there: a pin that does nothing is refused, never dropped.
    SHARING: ClassVar[dict[str, str]] = {}

    kernel: KernelRelease = Field(description="exact kernel release, e.g. 6.8.0-1021-aws")
    validation_shapes: list[ShapeName] = Field(min_length=1)
    regions: list[Region] = Field(min_length=1, description="target regions for replication")
    share: Sharing = Field(default_factory=Sharing)
    # how long promotion waits for one region's copy (large AMIs take hours to copy)
    copy_timeout_minutes: int = Field(
        60, ge=1, le=2880, description="promotion's wait for one region's copy"
    )

    @field_validator("regions")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        dupes = sorted({r for r in v if v.count(r) > 1})
        if dupes:
            raise ValueError(f"regions listed twice: {', '.join(dupes)}")
        return v

    @property
    def extra_packages(self) -> dict[str, str]:
        """Debian packages the stack pins beyond NVIDIA's, name -> exact version (the base
        role installs and holds them; the image's expectations check them)."""
        return {}

    @model_validator(mode="after")
    def _sharing_this_cloud_applies(self) -> CloudCommon:
        for name, why in self.SHARING.items():
            if getattr(self.share, name):
                raise ValueError(f"share.{name}: {why}")
        return self


class _UnsetNotWritten(Strict):
    """Optional fields added after stacks were written (``OPTIONAL``) are not serialised
    while unset: a stack that does not name one keeps the stack digest it had before the
    field existed (receipts and manifests bind it); a stack that sets one (a pinned base
    image) gets a new digest, because what goes into the image changed."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.OPTIONAL:
            if getattr(self, name) is None:
                data.pop(name, None)
        return data


class AwsBaseImage(_UnsetNotWritten):
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


class GcpBaseImage(_UnsetNotWritten):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("image",)

    project: GcpProject
    family: GcpLabel
    image: GcpLabel | None = Field(
        None,
        description="the base image pinned by name (in project); unset: plan and build "
        "resolve the family (images.getFromFamily) and record the image they used",
    )


class GcpBuild(Strict):
    project: GcpProject
    zone: GcpZone
    machine_type: GcpLabel


class GcpCapacity(Strict):
    """A specific reservation the validation instances consume (A3 H100 shapes are rarely
    available on demand): ``reservationAffinity`` SPECIFIC_RESERVATION by name."""

    reservation: GcpReservation = Field(
        description="reservation name, or projects/<project>/reservations/<name> if shared"
    )
    zone: GcpZone = Field(description="the reservation's zone (validation launches only there)")


class GcpCloud(CloudCommon):
    SHARING: ClassVar[dict[str, str]] = {
        name: "Compute Engine shares an image with IAM members (roles/compute.imageUser); "
        "name them in share.principals, e.g. group:ml@example.com"
        for name in ("accounts", "organizations")
    }

    base_image: GcpBaseImage
    build: GcpBuild
    family: GcpLabel = Field(description="production image family (the latest pointer)")
    # validation instances consume this reservation (its zone only)
    validation_capacity: GcpCapacity | None = None


class AzureBaseImage(_UnsetNotWritten):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("version",)

    publisher: AzureName
    offer: AzureName
    sku: AzureName
    version: AzureImageVersion | None = Field(
        None,
        description="the marketplace image version pinned, e.g. 22.04.202501150; unset: plan "
        "and build resolve the newest version of publisher/offer/sku and record it",
    )


class AzureGallery(Strict):
    resource_group: AzureGroup
    name: AzureName
    image_definition: AzureName
    # TargetRegion.regionalReplicaCount / storageAccountType (Compute Gallery REST API)
    replica_count: int = Field(
        1, ge=1, le=100, description="replicas of each version per target region"
    )
    storage_account_type: Literal["Standard_LRS", "Standard_ZRS", "Premium_LRS"] = Field(
        "Standard_LRS", description="storage of each region's replicas"
    )
    # The definition's boot properties, fixed at its creation (pipeline/clouds/azure/
    # definition.py): Generation 2 for the GPU sizes; Standard security, because
    # Trusted Launch's Secure Boot loads no DKMS-built NVIDIA module (AZURE-SECURE-BOOT-DKMS)
    hyper_v_generation: Literal["V1", "V2"] = Field("V2", description="VM generation")
    security_type: Literal["Standard", "TrustedLaunchSupported", "TrustedLaunch"] = Field(
        "Standard", description="the definition's SecurityType feature (Standard: none)"
    )


class AzureBuild(Strict):
    subscription_id: AzureGuid
    location: AzureLocation
    vm_size: AzureVmSize
    resource_group: AzureGroup


class AzureCapacity(Strict):
    """A capacity reservation group the validation VMs are placed in (ND H100 v5 is
    rarely available on demand): the VM's ``capacityReservation.capacityReservationGroup``
    (Compute REST API, Virtual Machines - Create Or Update)."""

    reservation_group: AzureReservationGroup = Field(
        description="capacity reservation group resource id"
    )
    zone: Literal["1", "2", "3"] | None = Field(
        None, description="the reservation's availability zone (validation launches only there)"
    )


class AzureCloud(CloudCommon):
    SHARING: ClassVar[dict[str, str]] = {
        **{
            name: "an Azure Compute Gallery is shared with subscriptions and tenants; name "
            "them in share.principals (a subscription id, or tenant:<id>)"
            for name in ("accounts", "organizations")
        },
        "public": "Azure publishes a gallery only as a community gallery (a property of the "
        "gallery, with a publisher contact and EULA), which imagectl does not create; "
        "share with subscriptions or tenants in share.principals",
    }

    base_image: AzureBaseImage
    build: AzureBuild
    gallery: AzureGallery
    # validation VMs are placed in this capacity reservation group (its zone only)
    validation_capacity: AzureCapacity | None = None


class LocalBuild(Strict):
    memory_mib: int = Field(2048, ge=512)
    cpus: int = Field(2, ge=1)
    disk_gib: int = Field(4, ge=2)


class LocalCloud(CloudCommon):
    base_image: Literal["debootstrap"] = "debootstrap"
    mirror: MirrorUrl = "http://deb.debian.org/debian"
    build: LocalBuild = Field(default_factory=LocalBuild)
    packages: dict[DebName, DebVersion] = Field(
        default_factory=dict, description="extra packages pinned to exact versions"
    )

    @property
    def extra_packages(self) -> dict[str, str]:
        return dict(self.packages)


class Clouds(Strict):
    aws: AwsCloud | None = None
    gcp: GcpCloud | None = None
    azure: AzureCloud | None = None
    local: LocalCloud | None = None

    def enabled(self) -> dict[str, CloudCommon]:
        return {c: getattr(self, c) for c in CLOUDS if getattr(self, c) is not None}


ToolkitInstall = Literal["at-validation", "bake"]


class Toolkit(Strict):
    """The validator's GPU toolkit: a torch release and its CUDA variant
    (images/compat/toolkits.yaml; 12.8 means ``+cu128``), installed on the validation host
    for the run only (``at-validation``, the default: the image keeps what fleet nodes
    run) or baked into the image's validator venv (``bake``)."""

    torch: str = Field(
        pattern=r"^\d{1,3}\.\d{1,3}\.\d{1,3}$", description="torch release, e.g. 2.9.1"
    )
    cuda: str = Field(pattern=r"^\d{2}\.\d$", description="CUDA variant as X.Y, e.g. 12.8 (cu128)")
    # The default is left out of dumps, so the digest of a stack that does not name it is
    # what it was before the switch existed; ``bake`` changes the image, and its digest.
    install: ToolkitInstall = Field(
        "at-validation",
        exclude_if=lambda v: v == "at-validation",
        description="at-validation: validate-image installs the toolkit on the validation "
        "host from the controller's hashed wheelhouse into a venv it removes afterwards (the "
        "image does not carry it); bake: the build installs it into the image's validator "
        "venv (every fleet node carries it)",
    )


class Validation(Strict):
    profile: Profile = "quick"
    max_receipt_age_hours: int = Field(72, ge=1)
    toolkit: Toolkit | None = Field(
        None,
        description="torch + CUDA variant for the quick/full/burn smoke tests; required for "
        "those profiles on GPUs (TOOLKIT-MISSING)",
    )
    nodes: int = Field(
        1,
        ge=1,
        le=64,
        description="hosts validated together (imagectl validate-image --nodes): > 1 launches "
        "them in the cloud's placement, runs collectives across them, and the gate requires a "
        "passing fabric receipt; 1 (the default) is left out of the stack digest",
    )
    watcher: bool = Field(
        False,
        description="enable the passive health watcher (imagectl-watch.service: journal Xid/"
        "SXid, NVML clock events, row remaps, ECC as metrics) on nodes booted from the image; "
        "installed always, off by default; false (the default) is left out of the stack digest",
    )


class Retention(Strict):
    keep_last: int = Field(3, ge=1, description="promoted images kept before deprecation")


class Stack(Strict):
    schema_version: Literal[1] = 1
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,38}[a-z0-9]$")
    description: Description = ""
    # A documentation stack: its account, subscription and project ids are placeholders
    # (images/compat/placeholders.yaml), which lint then warns about instead of refusing.
    # Not a pin: it is not part of the stack digest.
    example: bool = Field(
        False, description="a documentation example whose cloud ids are placeholders"
    )
    os: OsPins
    nvidia: NvidiaPins | None = Field(None, description="absent only for a stack with no GPUs")
    network: NetworkPins = Field(default_factory=NetworkPins)
    gpus: list[GpuSku] = Field(
        default_factory=list, description="target GPU SKUs (see images/compat/gpus.yaml)"
    )
    clouds: Clouds
    validation: Validation = Field(default_factory=Validation)
    retention: Retention = Field(default_factory=Retention)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not STACK_NAME.match(v):
            raise ValueError(
                f"'{v}' is not a valid stack name: 2-40 lowercase letters, digits and '-'"
            )
        return v

    @model_validator(mode="after")
    def _clouds(self) -> Stack:
        if self.gpus and self.nvidia is None:
            raise ValueError("the stack targets GPUs but has no 'nvidia' section")
        if not self.clouds.enabled():
            raise ValueError("a stack needs at least one cloud under 'clouds'")
        if self.network.aws_efa and self.clouds.aws is None:
            raise ValueError("network.aws_efa is set but the stack has no 'aws' cloud")
        if self.network.azure_infiniband and self.clouds.azure is None:
            raise ValueError("network.azure_infiniband is set but the stack has no 'azure' cloud")
        return self
