"""The Azure provider: gallery image versions, VMs for validation, exclude_from_latest."""

from __future__ import annotations

import re
import secrets
import time
from typing import TYPE_CHECKING, Any

from imagectl.clouds.azure import network as vnet
from imagectl.clouds.azure import placement as azure_placement
from imagectl.clouds.azure.clients import AzureClients
from imagectl.clouds.azure.definition import ensure_definition
from imagectl.clouds.azure.errors import is_not_found, translate_launch_error
from imagectl.clouds.azure.promotion import AzurePromotion
from imagectl.clouds.azure.resources import VERSION_ID, split_location, version_key
from imagectl.clouds.azure.spec import SPEC, AzureOptions
from imagectl.clouds.base import CloudImage, ImageQuery, Instance, LaunchRequest, Provider
from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.common import NotReachable, launch_failure, launch_tags, utcnow
from imagectl.clouds.placement import ManagedPlacement, Placement
from imagectl.core.errors import CloudError, UserError
from imagectl.tags import TAG_IMAGE, TAG_MANAGED
from imagectl.validators.identity import parse

if TYPE_CHECKING:
    from azure.mgmt.compute.models import GalleryImageVersion, ImageReference
    from azure.mgmt.compute.operations import GalleryImageVersionsOperations

    from imagectl.stacks.resolve import ResolvedStack


def _version_order(name: str) -> tuple[int, ...]:
    """A marketplace image version, Major.Minor.Build, compared part by part."""
    return tuple(int(p) if p.isdigit() else -1 for p in name.split("."))


class AzureProvider(AzurePromotion, Provider):
    spec = SPEC
    cloud = SPEC.name

    def __init__(self, options: AzureOptions) -> None:
        self.login_user = options.login_user  # osProfile.adminUsername (the spec's login_user)
        # validation VMs are placed in this capacity reservation group (its zone only)
        self.reservation_group = options.reservation_group
        self.reservation_zone = options.reservation_zone
        # the gallery image definition's boot properties (definition.py)
        self.hyper_v_generation = options.hyper_v_generation
        self.security_type = options.security_type

        self._init_promotion()
        self.subscription_id = options.subscription_id
        self.location = options.location
        self.gallery_rg = options.gallery_resource_group
        self.gallery = options.gallery
        self.definition = options.image_definition
        self.rg = options.resource_group or options.gallery_resource_group
        self.subnet_id = options.subnet_id
        self.zones = list(options.zones) if options.zones is not None else ["1", "2", "3"]
        self.poll_interval_s = (
            options.polling_interval if options.poll_interval_s is None else options.poll_interval_s
        )
        # the stack's target regions, replicas per region and storage type
        self.regions = list(options.regions or [])
        self.replica_count = options.replica_count
        self.storage_account_type = options.storage_account_type
        # how long a write waits for a version to leave Updating (replication)
        self.write_timeout_s = options.write_timeout_s
        self.clients = AzureClients(
            subscription_id=options.subscription_id,
            endpoint=options.endpoint,
            credential=options.credential,
            polling_interval=self.poll_interval_s,
            retry_total=options.retry_total,
            retry_backoff_factor=options.retry_backoff_factor,
        )

    @property
    def versions(self) -> GalleryImageVersionsOperations:
        return self.clients.compute.gallery_image_versions

    # -- images ----------------------------------------------------------------------------
    def _parts(self, image_id: str) -> tuple[str, str, str, str]:
        match = VERSION_ID.search(image_id)
        if match:
            return match["rg"], match["gallery"], match["definition"], match["version"]
        return self.gallery_rg, self.gallery, self.definition, image_id

    def _image(self, raw: GalleryImageVersion) -> CloudImage:
        profile = raw.publishing_profile
        state = {"Succeeded": "available", "Failed": "failed"}.get(
            raw.provisioning_state or "", "pending"
        )
        eol = profile.end_of_life_date if profile else None
        if state == "available" and eol and eol <= utcnow():
            state = "deprecated"
        return CloudImage(
            cloud="azure",
            region=raw.location,
            image_id=str(raw.id),  # ARM fills both (read-only) in every answer
            name=str(raw.name),
            state=state,
            tags=dict(raw.tags or {}),
            created_at=profile.published_date if profile else None,
        )

    def _list_raw(self) -> list[GalleryImageVersion]:
        return list(
            self.versions.list_by_gallery_image(self.gallery_rg, self.gallery, self.definition)
        )

    def query_images(self, query: ImageQuery) -> list[CloudImage]:
        wanted = {k: v for k, v in query.tag_values() if v}
        found = []
        for raw in self._list_raw():
            tags = raw.tags or {}
            if any(tags.get(k) != v for k, v in wanted.items()):
                continue
            if query.region and query.region not in self._target_regions(raw):
                continue
            found.append(self._image(raw))
        return sorted(found, key=lambda i: (i.created_at or utcnow(), version_key(i.name)))

    def _get_raw(self, image_id: str, expand: str | None = None) -> GalleryImageVersion | None:
        from azure.core.exceptions import HttpResponseError

        rg, gallery, definition, version = self._parts(image_id)
        try:
            kwargs = {"expand": expand} if expand else {}
            return self.versions.get(rg, gallery, definition, version, **kwargs)
        except HttpResponseError as exc:
            if is_not_found(exc):
                return None
            raise

    def newest_base_image(self, resolved: ResolvedStack) -> BaseImage:
        """The marketplace image's versions in the build location (Virtual Machine
        Images - List: publisher, offer, SKU), the highest Major.Minor.Build: what
        ``version: latest`` would give the builder that day."""
        settings = SPEC.settings(resolved.stack)
        b = settings.base_image
        location = settings.build.location
        try:
            found = self.clients.compute.virtual_machine_images.list(
                location=location, publisher_name=b.publisher, offer=b.offer, skus=b.sku
            )
        except Exception as exc:
            if not is_not_found(exc):
                raise
            found = []
        names = [str(v.name) for v in found or []]
        if not names:
            raise UserError(
                f"the marketplace has no version of {b.publisher}:{b.offer}:{b.sku} in "
                f"{location} (the base image of stack {resolved.name})",
                hint=f"Check clouds.azure.base_image, or pin a version with "
                f"{SPEC.base_image_pin_field()}",
            )
        newest = max(names, key=_version_order)
        return BaseImage(
            cloud="azure",
            id=newest,
            name=f"{b.publisher}:{b.offer}:{b.sku}:{newest}",
            query=SPEC.base_image_query(settings),
        )

    def image_identity(self, image: CloudImage) -> str:
        """``azure/<the gallery image version's full resource id>``: a version number is
        unique only within its image definition."""
        ref = parse("azure", image.image_id)
        if ref.scope is None:
            raise CloudError(
                f"{image.image_id} is not a gallery image version's resource id: its full "
                "identity cannot be signed"
            )
        return ref.text()

    def get_image(self, image_id: str, region: str) -> CloudImage | None:
        raw = self._get_raw(image_id)
        return self._image(raw) if raw is not None else None

    def _update(self, image_id: str, **changes: Any) -> GalleryImageVersion:
        """PATCH a version: tags and/or publishing-profile fields; wait for it."""
        from azure.mgmt.compute.models import (
            GalleryImageVersionPublishingProfile,
            GalleryImageVersionUpdate,
        )

        rg, gallery, definition, version = self._parts(image_id)
        update = GalleryImageVersionUpdate()
        if "tags" in changes:
            update.tags = changes.pop("tags")
        if changes:
            update.publishing_profile = GalleryImageVersionPublishingProfile(**changes)
        with self.write_lock:  # one write at a time, after Updating ends
            self.wait_writable(image_id)
            poller = self.versions.begin_update(rg, gallery, definition, version, update)
            return poller.result()

    def set_tags(self, image: CloudImage, tags: dict[str, str]) -> None:
        raw = self._get_raw(image.image_id)
        if raw is None:
            raise UserError(f"gallery image version {image.image_id} does not exist")
        self._update(image.image_id, tags={**(raw.tags or {}), **tags})

    # -- instances ---------------------------------------------------------------------------
    def prepare_build(self) -> None:
        """Before Packer publishes a version: the gallery image definition exists with
        the stack's generation and security type (created, or checked)."""
        ensure_definition(
            self.clients.compute,
            resource_group=self.gallery_rg,
            gallery=self.gallery,
            name=self.definition,
            location=self.location,
            hyper_v_generation=self.hyper_v_generation,
            security_type=self.security_type,
        )

    def candidate_locations(self, image: CloudImage) -> list[str]:
        """The image's location, one entry per availability zone (``eastus/1``...)."""
        region = image.region or self.location
        if self.reservation_group:  # a reservation group lives in the build location
            return [
                f"{self.location}/{self.reservation_zone}"
                if self.reservation_zone
                else self.location
            ]
        return [f"{region}/{z}" for z in self.zones] or [region]

    def launch(self, request: LaunchRequest) -> Instance:
        from azure.core.exceptions import HttpResponseError

        region, zone = split_location(request.location)
        name = re.sub(
            r"[^a-z0-9-]", "-", f"imagectl-{request.stack}-{secrets.token_hex(3)}".lower()
        )[:60]
        tags = launch_tags(request)
        net = self.clients.network
        subnet = vnet.ensure_subnet(net, self.rg, region, self.subnet_id)
        nic_id = vnet.create(
            net,
            rg=self.rg,
            location=region,
            name=name,
            subnet_id=subnet,
            allowed_cidr=request.allowed_cidr,
            tags=tags,
            zone=zone,
        )
        from azure.mgmt.compute import models as m

        linux = m.LinuxConfiguration(disable_password_authentication=True)
        if request.ssh_public_key:
            linux.ssh = m.SshConfiguration(
                public_keys=[
                    m.SshPublicKey(
                        path=f"/home/{self.login_user}/.ssh/authorized_keys",
                        key_data=request.ssh_public_key.strip(),
                    )
                ]
            )
        body = m.VirtualMachine(
            location=region,
            tags=tags,
            zones=[zone] if zone else None,
            properties=m.VirtualMachineProperties(
                hardware_profile=m.HardwareProfile(vm_size=request.shape),
                storage_profile=m.StorageProfile(
                    image_reference=m.ImageReference(id=request.image.image_id),
                    os_disk=m.OSDisk(
                        create_option="FromImage",
                        delete_option="Delete",
                        managed_disk=m.ManagedDiskParameters(storage_account_type="Premium_LRS"),
                    ),
                ),
                os_profile=m.OSProfile(
                    computer_name=name, admin_username=self.login_user, linux_configuration=linux
                ),
                network_profile=m.NetworkProfile(
                    network_interfaces=[
                        m.NetworkInterfaceReference(
                            id=nic_id,
                            properties=m.NetworkInterfaceReferenceProperties(
                                primary=True, delete_option="Delete"
                            ),
                        )
                    ]
                ),
                # No managed identity: the VM gets no role in the subscription.
            ),
        )
        if self.security_type == "TrustedLaunch" and body.properties is not None:
            # a TrustedLaunch definition makes only Trusted Launch VMs (definition.py)
            body.properties.security_profile = m.SecurityProfile(
                security_type="TrustedLaunch",
                uefi_settings=m.UefiSettings(secure_boot_enabled=True, v_tpm_enabled=True),
            )
        if request.placement is not None and body.properties is not None:  # azure/placement.py
            body.properties.proximity_placement_group = m.SubResource(
                id=request.placement.resource_id
            )
        if self.reservation_group and body.properties is not None:
            body.properties.capacity_reservation = m.CapacityReservationProfile(
                capacity_reservation_group=m.SubResource(id=self.reservation_group)
            )
        try:
            self.clients.compute.virtual_machines.begin_create_or_update(
                self.rg, name, body
            ).result()
        except HttpResponseError as exc:
            self._cleanup(name)
            where = request.location
            if self.reservation_group:  # "no capacity" names the reservation tried
                group = self.reservation_group.rsplit("/", 1)[-1]
                where = f"{request.location} (capacity reservation group {group})"
            refused = (
                f"Azure refused to create {request.shape} from {request.image.name} in "
                f"{request.location}: {exc.message if hasattr(exc, 'message') else exc}"
            )
            raise launch_failure(exc, translate_launch_error(exc, where), refused) from exc
        return Instance(
            cloud="azure",
            region=request.location,
            instance_id=name,
            shape=request.shape,
            image_id=request.image.image_id,
            state="creating",
            address=vnet.address(net, self.rg, name),
            tags=tags,
            launched_at=utcnow(),
            private_address=vnet.private_address(net, self.rg, name),
        )

    def create_placement(
        self, *, name: str, location: str, shape: str, count: int, tags: dict[str, str]
    ) -> Placement | None:
        return azure_placement.create(
            self.clients.compute, self.rg, name=name, location=location, tags=tags
        )

    def delete_placement(self, placement: Placement) -> None:
        azure_placement.delete(self.clients.compute, self.rg, placement)

    def list_placements(self) -> list[ManagedPlacement]:
        return azure_placement.list_managed(self.clients.compute, self.rg)

    def _cleanup(self, name: str) -> None:
        from azure.core.exceptions import HttpResponseError

        try:
            self.clients.compute.virtual_machines.begin_delete(self.rg, name).result()
        except HttpResponseError as exc:
            if not is_not_found(exc):
                raise
        vnet.delete(self.clients.network, self.rg, name)

    def _power_state(self, name: str) -> str | None:
        from azure.core.exceptions import HttpResponseError

        try:
            view = self.clients.compute.virtual_machines.instance_view(self.rg, name)
        except HttpResponseError as exc:
            if is_not_found(exc):
                return None
            raise
        for status in view.statuses or []:
            if (status.code or "").startswith("PowerState/"):
                return str(status.code).split("/", 1)[1]
        return "unknown"

    def wait_reachable(self, instance: Instance, *, timeout_s: float) -> Instance:
        deadline = time.monotonic() + timeout_s
        while True:
            power = self._power_state(instance.instance_id)
            if power is None or power in ("deallocated", "deallocating", "stopped"):
                raise NotReachable(instance.instance_id, f"the VM is {power or 'gone'}")
            if power == "running":
                address = vnet.address(self.clients.network, self.rg, instance.instance_id)
                return Instance(**{**instance.__dict__, "state": "running", "address": address})
            if time.monotonic() >= deadline:
                raise NotReachable(instance.instance_id, f"still {power} after {timeout_s:.0f} s")
            time.sleep(self.poll_interval_s)

    def terminate(self, instance: Instance) -> None:
        self._cleanup(instance.instance_id)

    @staticmethod
    def _vm_image(image_ref: ImageReference | None) -> str:
        """The gallery version a VM runs. A VM made from an image definition id (the
        gallery's "latest") keeps the definition in ``imageReference.id``; ARM names the
        version it resolved to in ``exactVersion``."""
        if image_ref is None or not image_ref.id:
            return ""
        image_id = str(image_ref.id)
        exact = getattr(image_ref, "exact_version", None)
        if exact and "/versions/" not in image_id.lower():
            return f"{image_id.rstrip('/')}/versions/{exact}"
        return image_id

    def list_instances(self, *, managed_only: bool = True) -> list[Instance]:
        """Every VM of the subscription (a fleet spans resource groups), or only
        imagectl's own."""
        found = []
        for vm in self.clients.compute.virtual_machines.list_all():
            tags = dict(vm.tags or {})
            if managed_only and tags.get(TAG_MANAGED) != "true":
                continue
            zone = vm.zones[0] if vm.zones else None
            image_ref = vm.storage_profile.image_reference if vm.storage_profile else None
            found.append(
                Instance(
                    cloud="azure",
                    region=f"{vm.location}/{zone}" if zone else vm.location,
                    instance_id=vm.name or "",
                    shape=vm.hardware_profile.vm_size if vm.hardware_profile else "",
                    image_id=self._vm_image(image_ref) or tags.get(TAG_IMAGE, ""),
                    state=vm.provisioning_state or "",
                    tags=tags,
                    launched_at=vm.time_created,
                )
            )
        return found


def create_provider(options: AzureOptions) -> AzureProvider:
    return AzureProvider(options)
