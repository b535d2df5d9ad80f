"""The provider interface every cloud implements, and the records it returns.

Issue map: build / find / tag / launch / wait / terminate / list_instances serve
validation runs and the reaper; replicate / replica_status / share / pointers /
deprecate / delete serve promotion, rollback and retention; list_instances and
replica_status serve drift. Every method is idempotent where the cloud allows it.
Implementations: aws.py (boto3), gcp.py (google-cloud-compute), azure.py
(azure-mgmt-compute), local.py (directories as regions, for the local end-to-end run).
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from imagectl.clouds.base_image import BaseImage
from imagectl.core.errors import UserError
from imagectl.stacks.schema import Sharing
from imagectl.tags import TAG_DIGEST, TAG_STACK, TAG_STATE, TAG_TTL
from imagectl.validators.identity import ImageRef

if TYPE_CHECKING:
    from imagectl.clouds.placement import ManagedPlacement, Placement
    from imagectl.clouds.spec import CloudSpec
    from imagectl.stacks.resolve import ResolvedStack

# Tag / label keys: imagectl.tags (the one place they are spelt).


@dataclass(frozen=True)
class CloudImage:
    """An image in one region (AMI id, GCP image name, Azure gallery version id, path)."""

    cloud: str
    region: str
    image_id: str
    name: str = ""
    state: str = ""  # cloud-side state: available | pending | failed | deprecated
    tags: dict[str, str] = field(default_factory=dict)
    created_at: dt.datetime | None = None


@dataclass(frozen=True)
class Instance:
    cloud: str
    region: str  # region or zone
    instance_id: str
    shape: str
    image_id: str
    state: str = ""
    address: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    launched_at: dt.datetime | None = None
    ssh_port: int = 22  # where SSH answers at ``address`` (the local cloud forwards a port)
    # the address the other hosts of the run reach it at (the cloud's private IP on the
    # VPC / subnet: a multi-node run's hostfile); None where the cloud reports none
    private_address: str | None = None

    def expires_at(self) -> dt.datetime | None:
        raw = self.tags.get(TAG_TTL)
        return dt.datetime.fromisoformat(raw) if raw else None


@dataclass(frozen=True)
class ImageQuery:
    """What ``Provider.find_images`` looks for: imagectl's images tagged with ``stack``,
    the stack ``digest`` and the ``state`` given (None: any), in ``region`` (None: every
    region the cloud serves)."""

    stack: str | None = None
    digest: str | None = None
    state: str | None = None
    region: str | None = None

    def tag_values(self) -> tuple[tuple[str, str | None], ...]:
        """Each tag a filter matches (``imagectl.tags``) with its value, None where unset."""
        return ((TAG_STACK, self.stack), (TAG_DIGEST, self.digest), (TAG_STATE, self.state))


@dataclass(frozen=True)
class LaunchRequest:
    """One host to start (``Provider.launch``): ``image`` on ``shape`` in ``location`` (a
    region or a zone), living ``ttl`` (its expires-at tag: the reaper's key), tagged with
    who launched it and for which stack. The run's SSH key, the one address SSH admits
    (None: no inbound SSH) and the multi-node placement it joins are optional."""

    image: CloudImage
    shape: str
    _: KW_ONLY
    location: str
    ttl: dt.timedelta
    launched_by: str
    stack: str
    ssh_public_key: str | None = None
    allowed_cidr: str | None = None
    placement: Placement | None = None


@dataclass(frozen=True)
class ReplicaStatus:
    region: str
    state: str  # available | pending | failed | missing
    image_id: str | None = None
    detail: str = ""


class CapacityError(Exception):
    """The shape has no capacity in this zone/region: try another, never block the image."""

    def __init__(self, location: str, detail: str):
        self.location = location
        self.detail = detail
        super().__init__(f"no capacity in {location}: {detail}")


class QuotaError(Exception):
    """The account's quota forbids the launch: the run is inconclusive."""


class Provider(ABC):
    # the cloud this provider implements (its CloudSpec), and that spec's name
    spec: ClassVar[CloudSpec[Any]]
    cloud: ClassVar[str]

    def prepare_build(self) -> None:
        """What must exist in the cloud before Packer runs (Azure: the gallery image
        definition). Nothing by default."""
        return None

    # -- base image (known ancestry: imagectl.clouds.base_image) -------------------------
    def newest_base_image(self, resolved: ResolvedStack) -> BaseImage:
        """The newest image the stack's base image query names now (the cloud's answer,
        whatever the stack pins); UserError when nothing matches. The local cloud builds
        its base itself (``imagectl.building.base_image``)."""
        raise UserError(f"the {self.cloud} cloud has no base image query to resolve")

    # -- images ------------------------------------------------------------------
    def find_images(
        self,
        *,
        stack: str | None = None,
        digest: str | None = None,
        state: str | None = None,
        region: str | None = None,
    ) -> list[CloudImage]:
        """imagectl's images matching every filter given, oldest first (the cloud's
        ``query_images``)."""
        return self.query_images(ImageQuery(stack, digest, state, region))

    @abstractmethod
    def query_images(self, query: ImageQuery) -> list[CloudImage]: ...

    @abstractmethod
    def get_image(self, image_id: str, region: str) -> CloudImage | None: ...

    def image_identity(self, image: CloudImage) -> str:
        """The image's full identity, as a signed statement names it and a verifier
        compares it (``imagectl.validators.identity``): AWS adds the owning account,
        Google Cloud the project and numeric id, Azure's id is its full resource id.
        The local cloud's id is a content address: region and id."""
        return ImageRef(self.cloud, image.image_id, image.region).text()

    @abstractmethod
    def set_tags(self, image: CloudImage, tags: dict[str, str]) -> None:
        """Add or replace ``tags`` (keys from ``imagectl.tags``) on the image, keeping
        its other tags; GCP encodes them as labels."""

    def tag_state(self, image: CloudImage, state: str) -> None:
        self.set_tags(image, {TAG_STATE: str(state)})

    # -- instances (validation runs, reaper, fleet drift) ---------------------------
    @abstractmethod
    def launch(self, request: LaunchRequest) -> Instance: ...

    # -- placement (multi-node runs: imagectl.clouds.placement) -------------------------
    def create_placement(
        self, *, name: str, location: str, shape: str, count: int, tags: dict[str, str]
    ) -> Placement | None:
        """The cloud's placement for ``count`` hosts of ``shape`` near ``location`` (a
        region or a zone), created now; None where the cloud has none."""
        return None

    def delete_placement(self, placement: Placement) -> None:
        """Delete it (after its hosts are terminated); a missing one is already gone."""
        return None

    def list_placements(self) -> list[ManagedPlacement]:
        """Every placement carrying imagectl's managed marking, across the cloud's pages,
        each with its marking read back as tags and the instances it holds now: what
        ``imagectl reap`` sweeps after a runner died before ``delete_placement``. Empty
        where the cloud has none."""
        return []

    @abstractmethod
    def wait_reachable(self, instance: Instance, *, timeout_s: float) -> Instance: ...

    @abstractmethod
    def terminate(self, instance: Instance) -> None: ...

    @abstractmethod
    def list_instances(self, *, managed_only: bool = True) -> list[Instance]: ...

    def reap_orphans(self, *, now: dt.datetime, dry_run: bool = False) -> list[Instance]:
        """What a validation run leaves besides its instance when it dies (AWS: its
        security group), whose TTL passed: deleted, or listed with ``dry_run``. Nothing
        by default: on the other clouds the instance's deletion takes its parts along."""
        return []

    # -- promotion ------------------------------------------------------------------
    @abstractmethod
    def replicate(self, image: CloudImage, region: str, *, token: str) -> ReplicaStatus:
        """Start (or find, for the same token) the copy of ``image`` into ``region``."""

    @abstractmethod
    def replica_status(self, image: CloudImage, region: str) -> ReplicaStatus: ...

    @abstractmethod
    def share(self, replica: CloudImage, sharing: Sharing) -> None:
        """Apply the stack's sharing (accounts / orgs / principals); never public unless set."""

    @abstractmethod
    def get_pointer(self, stack: str, region: str) -> str | None:
        """The image id the stack's "latest" pointer names in ``region``."""

    @abstractmethod
    def set_pointer(self, stack: str, region: str, image_id: str) -> None: ...

    # The canary pointer beside "latest": what a fleet's canary fraction deploys
    # from, by each cloud's documented means (AWS: a second SSM parameter; Google Cloud: a
    # second image family; Azure: the gallery version tagged imagectl:canary=true; local:
    # a file beside "latest"). A cloud's provider that does not override these says so.
    def get_canary_pointer(self, stack: str, region: str) -> str | None:
        """The image id the stack's canary pointer names in ``region`` (None: unset)."""
        raise UserError(
            f"the canary pointer is not implemented on the {self.cloud} cloud yet",
            hint=f"Promote without --canary on {self.cloud}, or give its provider a canary pointer",
        )

    def set_canary_pointer(self, stack: str, region: str, image_id: str | None) -> None:
        """Point the stack's canary at ``image_id`` in ``region`` (None: remove it)."""
        raise UserError(
            f"the canary pointer is not implemented on the {self.cloud} cloud yet",
            hint=f"Promote without --canary on {self.cloud}, or give its provider a canary pointer",
        )

    @abstractmethod
    def deprecate(
        self,
        image: CloudImage,
        *,
        replacement: CloudImage | None = None,
        at: dt.datetime | None = None,
    ) -> None: ...

    @abstractmethod
    def delete(self, image: CloudImage) -> None: ...
