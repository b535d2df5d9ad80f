"""The stack file schema: one YAML file per image stack, the single source of truth.

Every version an image carries is typed once here. Derived values (driver branch,
fabric manager version, DCGM package, package names) are computed by ``resolve.py``,
never written twice. Unknown keys, wrong types and impossible values are errors.

The ``clouds:`` sections are not here: each cloud's folder holds its own section model
(``imagectl.clouds.<name>.stack``, a ``CloudCommon``) and registers it with the cloud
registry, which fills the ``imagectl.stacks.sections`` hook. ``Clouds`` is built from the
registered sections the first time a stack is validated (``Stack`` defers building its
validator until then), so this module names no cloud and imports none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    SerializerFunctionWrapHandler,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from imagectl.core.errors import UserError
from imagectl.core.versions import Dotted, NcclVersion, driver_branch
from imagectl.stacks.patterns import (
    DebVersion,
    Description,
    GpuSku,
    KernelRelease,
    Principal,
    Region,
    ShapeName,
    Version,
)
from imagectl.stacks.sections import CloudSection, sections

STACK_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,38}[a-z0-9]$")
_AWS_ACCOUNT = re.compile(r"^\d{12}$")
_ORG_ARN = re.compile(r"^arn:aws:organizations::\d{12}:(organization|ou)/[\w/-]+$")

Profile = Literal["boot", "quick", "full", "burn"]
T = TypeVar("T")
C = TypeVar("C", bound="CloudCommon")


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


class Efa(Strict):
    installer: Version
    ofi_nccl: Version

    @field_validator("installer", "ofi_nccl", mode="before")
    @classmethod
    def _ver(cls, v: str) -> str:
        _checked(lambda: Dotted.parse(v, what="EFA version"))
        return v


class Infiniband(Strict):
    doca_ofed: Version = Field(description="DOCA-OFED release, e.g. 3.1.0")
    peermem: bool = True


# network keys once named after a cloud, and the fabric each is now
RENAMED_FABRICS = {"aws_efa": "efa", "azure_infiniband": "infiniband"}


class NetworkPins(Strict):
    """The fabrics' software, keyed by fabric (the ``nics.fabric`` of
    images/catalog/shapes.yaml, the role playbooks/roles/<fabric>); a cloud's stack
    section says which fabrics its images install (``CloudSection.fabrics``)."""

    efa: Efa | None = None
    infiniband: Infiniband | None = None

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, v: object) -> object:
        if isinstance(v, dict):
            for old, new in RENAMED_FABRICS.items():
                if old in v:
                    raise ValueError(
                        f"network.{old} is now network.{new} (the stack's fabrics are keyed "
                        f"by fabric): rename the key"
                    )
        return v


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

    @property
    def security_type(self) -> str | None:
        """The image's security type where the cloud has one (Azure's image definition:
        Trusted Launch's Secure Boot loads no DKMS-built module; the compatibility rules)."""
        return None

    @model_validator(mode="after")
    def _sharing_this_cloud_applies(self) -> CloudCommon:
        for name, why in self.SHARING.items():
            if getattr(self.share, name):
                raise ValueError(f"share.{name}: {why}")
        return self


class UnsetNotWritten(Strict):
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


class Clouds(Strict):
    """``clouds:``: one optional section per registered cloud (``stacks.sections``). The
    validated object is an instance of ``clouds_model()``, this class with a field per
    cloud; code reads a section with ``section(name)`` (or the cloud's
    ``CloudSpec.settings``), never by attribute."""

    def enabled(self) -> dict[str, CloudCommon]:
        """The stack's clouds, in the registry's order."""
        found = {name: getattr(self, name, None) for name in type(self).model_fields}
        return {name: s for name, s in found.items() if s is not None}

    def section(self, name: str) -> CloudCommon | None:
        """The stack's ``clouds.<name>`` section, or None."""
        return self.enabled().get(name)

    def section_of(self, model: type[C]) -> C | None:
        """The stack's section of the cloud whose model is ``model`` (typed), or None:
        ``stack.clouds.section_of(LocalCloud)``."""
        return next((s for s in self.enabled().values() if isinstance(s, model)), None)

    @model_serializer(mode="wrap")
    def _absent_sections(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, section in sections().items():
            if data.get(name, 0) is None and not section.written_when_absent:
                del data[name]
        return data


@lru_cache(maxsize=8)
def _clouds_model(registered: tuple[CloudSection, ...]) -> type[Clouds]:
    fields: dict[str, Any] = {s.name: (s.model | None, None) for s in registered}
    model: type[Clouds] = create_model("Clouds", __base__=Clouds, __module__=__name__, **fields)
    return model


def clouds_model() -> type[Clouds]:
    """``Clouds`` with one optional field per registered cloud, in the registry's order."""
    return _clouds_model(tuple(sections().values()))


def _registered_clouds(_source: Any, handler: Any) -> Any:
    return handler(clouds_model())


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


Severity = Literal["negligible", "low", "medium", "high", "critical"]


class VulnerabilityGate(Strict):
    """What blocks a candidate in the scan of its SBOM (Grype): a match at or above
    ``fail_on`` in Grype's order, counted only when it has a fix with ``only_fixed``."""

    fail_on: Severity = Field(
        description="the lowest severity that blocks (Grype's order: negligible, low, "
        "medium, high, critical)"
    )
    only_fixed: bool = Field(
        True, description="count only matches whose fix state is 'fixed' (Grype --only-fixed)"
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
    vulnerabilities: VulnerabilityGate | None = Field(
        None,
        exclude_if=lambda v: v is None,
        description="the SBOM scan's threshold (imagectl scan); absent: the sourced default "
        "in images/compat/vulnerabilities.yaml; absent is left out of the stack digest",
    )


class Retention(Strict):
    keep_last: int = Field(3, ge=1, description="promoted images kept before deprecation")


class Stack(Strict):
    # the validator is built on first use, when the clouds' sections are registered
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

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
    clouds: Annotated[Clouds, GetPydanticSchema(_registered_clouds)]
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
        installed = {f for name in self.clouds.enabled() for f in sections()[name].fabrics}
        for fabric, pins in self.network:
            if pins is not None and fabric not in installed:
                by = [s.name for s in sections().values() if fabric in s.fabrics]
                raise ValueError(
                    f"network.{fabric} is set but none of the stack's clouds installs it; "
                    f"add a cloud that does ({', '.join(by) or 'none registered'}) or remove "
                    f"network.{fabric}"
                )
        return self
