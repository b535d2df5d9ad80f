"""What one cloud means to imagectl, kept in one object (``CloudSpec``).

A spec is the only place a cloud's facts are spelt: its stack section, the Packer builder
of ``images/<cloud>/candidate.pkr.hcl`` and the Packer variables it takes, the provider
options its SDK layer takes, where a candidate lives before promotion, how a tag key and
value are written (Google Cloud labels), how a zone names its region, and which of the
stack's fabrics (EFA, InfiniBand) it installs. Code outside a cloud's folder asks the spec
(``imagectl.clouds.registry.cloud_spec``) instead of comparing cloud names.

A spec imports no cloud SDK: ``provider_module`` names the module ``get_provider``
imports when a provider is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

from imagectl.core.errors import UserError
from imagectl.stacks.schema import CloudCommon, Stack
from imagectl.stacks.sections import CloudSection

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

S = TypeVar("S", bound=CloudCommon)


@dataclass(frozen=True, kw_only=True)
class ProviderOptions:
    """What a cloud's provider is built from. One subclass per cloud, beside its spec
    (``AwsOptions``...): ``CloudSpec.provider_options`` fills it from the stack, callers
    override fields with ``dataclasses.replace``, and a misspelt option is a TypeError
    where it is written, never an argument some provider quietly ignores."""

    def polled(self, seconds: float) -> ProviderOptions:
        """The same options with every polling interval and retry back-off at
        ``seconds`` (``IMAGECTL_CLOUD_POLL_S``: tests and the local emulators)."""
        return self

    def in_regions(self, regions: list[str]) -> ProviderOptions:
        """The same options listing ``regions`` (a fleet or drift listing); the local
        registry lists every region it holds, so it keeps its options."""
        return self


@dataclass(frozen=True)
class ArtifactRef:
    """Where one built image is, as the cloud reads it from Packer's manifest entry
    (``CloudSpec.packer_artifacts``; imagectl.packer.manifest adds the entry's tags)."""

    id: str
    location: str  # a region, a project, a location; the cloud's name for a local disk
    name: str = ""


class CloudSpec(Generic[S]):
    name: ClassVar[str]
    # its stack section (``clouds.<name>``: model, location checks, fabrics), beside the
    # spec in ``<cloud>/stack.py``; the registry hands it to the stack schema
    section: ClassVar[CloudSection]
    # one image id serves every region (a GCP image, an Azure gallery version: deprecating
    # it anywhere deprecates it everywhere), or one image per region (an AMI and its copies)
    image_scope: ClassVar[Literal["regional", "global"]] = "regional"
    # where its Packer templates live; None: images/<name>/ of the workspace (a cloud
    # registered from outside imagectl names its own folder)
    templates: ClassVar[Path | None] = None
    # validation shapes of this cloud kept outside images/catalog/shapes.yaml (a cloud
    # registered from outside imagectl ships its own), merged into the shape table
    shapes_file: ClassVar[Path | None] = None
    # the Packer builder type of images/<name>/candidate.pkr.hcl (source "<builder>" "candidate")
    packer_builder: ClassVar[str]
    # imported by get_provider; holds create_provider(options)
    provider_module: ClassVar[str]
    # imported by ``imagectl doctor`` (imagectl.clouds.account.cloud_checks): the cloud's account
    # checks (``ENDPOINT_ENV``, ``connect``, ``quota_api`` and ``diagnose``,
    # imagectl.doctor.run.AccountChecks), or "" for a cloud with no account to check (the
    # local one)
    doctor_module: ClassVar[str] = ""
    # what create_provider takes (this cloud's ProviderOptions, beside its spec)
    options_type: ClassVar[type[ProviderOptions]]
    # a real cloud: the reaper sweeps it and built artifacts are tagged in it
    remote: ClassVar[bool] = True
    # copy requests one region at a time (the regions are one list on one resource)
    replicate_serially: ClassVar[bool] = False
    # the stack's network sections this cloud's image installs (stack.network.<name>)
    fabrics: ClassVar[frozenset[str]] = frozenset()
    # Packer's Ansible pass: --become (a cloud's SSH user is not root) and strip_path of
    # the manifest post-processor (a local artifact id is its file path)
    ansible_become: ClassVar[bool] = True
    manifest_strip_path: ClassVar[bool] = True
    # a shell command Packer runs after Ansible (Azure: waagent deprovision), or ""
    deprovision_command: ClassVar[str] = ""
    # the build makes its own base disk before Packer (the local cloud: debootstrap and a
    # chroot, imagectl.building.local), may reuse a candidate and inject a fault
    builds_base_disk: ClassVar[bool] = False

    def packer_dir(self, images: Path) -> Path:
        """Its Packer templates: ``images/<name>/`` of the workspace's ``images``, or the
        folder the spec names (``templates``)."""
        return self.templates or images / self.name

    def settings(self, stack: Stack) -> S:
        """The stack's ``clouds.<name>`` section; UserError when the stack has none."""
        section = stack.clouds.section(self.name)
        if section is None:
            raise UserError(
                f"stack '{stack.name}' has no '{self.name}' cloud",
                hint=f"Add clouds.{self.name} to images/stacks/{stack.name}.yaml, or pick "
                f"one of its clouds: {', '.join(stack.clouds.enabled()) or 'none'}",
            )
        return cast(S, section)

    # --- build ---
    def packer_vars(self, r: ResolvedStack, settings: S, *, build_id: str) -> dict[str, Any]:
        """The Packer variables of ``images/<name>/variables.pkr.hcl`` that a stack sets."""
        raise NotImplementedError

    def packer_artifacts(
        self, artifact_id: str, files: list[str], variables: Mapping[str, Any]
    ) -> list[ArtifactRef]:
        """The images one entry of Packer's manifest post-processor records: its
        ``artifact_id`` and ``files`` as this cloud's builder writes them, with the build's
        Packer ``variables`` (the var file). By default the artifact id is the image's id."""
        return [ArtifactRef(id=artifact_id, location="", name=str(variables.get("image_name", "")))]

    def runtime_packer_vars(self, r: ResolvedStack, folder: Path, base_dir: str) -> dict[str, str]:
        """Packer variables a build fills in from its folder (the local disk paths)."""
        return {}

    def endpoint_packer_vars(self) -> dict[str, str]:
        """Packer variables pointing the builder at an emulator named in the environment
        (the same variables the cloud's clients read)."""
        return {}

    def build_site(self, settings: S) -> tuple[str, str]:
        """(where the build runs, on what machine), for ``imagectl plan``."""
        raise NotImplementedError

    def build_region(self, settings: S) -> str:
        """Where a candidate lives before promotion (its catalog region)."""
        raise NotImplementedError

    # --- base image (imagectl.clouds.base_image) ---
    # the Packer variable of images/<name>/ that takes the base image's id
    base_image_packer_var: ClassVar[str] = ""

    def base_image_query(self, settings: S) -> str:
        """The stack's base image query as one line (owner/name filter, project/family,
        publisher:offer:sku), for plans, records and drift findings."""
        raise NotImplementedError

    def pinned_base_image(self, settings: S) -> str | None:
        """The base image id the stack pins, or None (resolved at plan and build)."""
        raise NotImplementedError

    def base_image_pin_field(self) -> str:
        """Where a stack pins the id (``clouds.<name>.base_image.<field>``)."""
        raise NotImplementedError

    # --- provider ---
    def provider_options(self, settings: S) -> ProviderOptions:
        """The options of this cloud's ``create_provider`` from its stack section."""
        raise NotImplementedError

    def login_user(self, settings: S) -> str:
        """The user a validation host of this cloud is logged into with the run's key: the
        one the cloud itself gives the key to when the provider launches the host (the
        provider and the SSH inventory both ask here, so they cannot disagree)."""
        raise NotImplementedError

    def listing_regions(self, settings: S) -> list[str]:
        """The regions a fleet or drift listing covers."""
        return list(settings.regions)

    def region_of(self, location: str) -> str:
        """The region of an instance's reported location (a zone, or region/zone)."""
        return location

    # --- tags ---
    def tag_key(self, key: str) -> str:
        return key

    def tag_value(self, value: object) -> str:
        return str(value)

    def tags(self, values: Mapping[str, object]) -> dict[str, str]:
        """``{imagectl:<name>: value}`` as this cloud writes tags (keys and values)."""
        return {self.tag_key(k): self.tag_value(v) for k, v in values.items()}
