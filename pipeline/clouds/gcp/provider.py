"""The Google Cloud provider: global images, families as the pointer, zonal instances."""

from __future__ import annotations

import datetime as dt
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any

from imagectl.clouds.base import (
    CapacityError,
    CloudImage,
    ImageQuery,
    Instance,
    LaunchRequest,
    Provider,
)
from imagectl.clouds.base_image import BaseImage
from imagectl.clouds.common import NotReachable, check_cidr, launch_tags, parse_time, utcnow
from imagectl.clouds.gcp import compute_sdk
from imagectl.clouds.gcp import placement as gcp_placement
from imagectl.clouds.gcp.clients import GcpClients
from imagectl.clouds.gcp.labels import from_labels, label_filter, to_labels
from imagectl.clouds.gcp.launch import launch_settings
from imagectl.clouds.gcp.promotion import GcpPromotion
from imagectl.clouds.gcp.resources import image_state, resource_name
from imagectl.clouds.gcp.spec import GLOBAL, SPEC, GcpOptions
from imagectl.clouds.placement import ManagedPlacement, Placement
from imagectl.core.errors import CloudError, UserError
from imagectl.tags import (
    TAG_IMAGE,
    TAG_MANAGED,
    TAG_STACK,
    TAG_TTL,
    gcp_label_key,
    gcp_label_value,
)
from imagectl.validators.identity import ImageRef

if TYPE_CHECKING:
    from imagectl.stacks.resolve import ResolvedStack

# setLabels tries on one image before a 412 (labels changed since read) is an error
LABEL_ATTEMPTS = 5
# how imagectl's per-instance SSH rules start their description (found by reap_orphans)
FIREWALL_MARK = "imagectl validation instance"


class GcpProvider(GcpPromotion, Provider):
    spec = SPEC
    cloud = SPEC.name

    def __init__(self, options: GcpOptions) -> None:
        self.login_user = options.login_user  # metadata ssh-keys USER (the spec's login_user)
        # validation instances consume this specific reservation, in its zone only
        self.reservation = options.reservation
        self.reservation_zone = options.reservation_zone

        self._init_promotion()
        # image name -> the lock its setLabels calls take (one at a time per image)
        self._label_locks: dict[str, threading.Lock] = {}
        self._label_locks_guard = threading.Lock()
        if not options.project:
            raise UserError(
                "the gcp provider needs a project",
                hint="Set clouds.gcp.build.project in the stack file",
            )
        self.project = options.project
        self.zone = options.zone
        self.family = options.family
        self.network = options.network
        self.subnetwork = options.subnetwork
        self.poll_interval_s = options.poll_interval_s
        self.boot_disk_gb = options.boot_disk_gb
        # the storage locations of a promoted image (the stack's clouds.gcp.regions)
        self.regions = list(options.regions or [])
        # the multi-node runs whose peers rule this process made (_open_peers)
        self._peers: set[str] = set()
        self._peers_lock = threading.Lock()
        self.clients = GcpClients(
            project=options.project,
            endpoint=options.endpoint,
            credentials=options.credentials,
            retry_initial_s=options.retry_initial_s,
            poll_interval_s=options.poll_interval_s,
        )

    # -- images --------------------------------------------------------------------------
    def _image(self, raw: Any) -> CloudImage:
        # An image is a global resource (the build records it in GLOBAL): its storage
        # locations are no region of its own, so no promotion target is "the source's
        # region" and every target's replica is the promotion's one image.
        return CloudImage(
            cloud="gcp",
            region=GLOBAL,
            image_id=raw.name,
            name=raw.name,
            state=image_state(raw),
            tags=from_labels(dict(raw.labels)),
            created_at=parse_time(raw.creation_timestamp) if raw.creation_timestamp else None,
        )

    def _get_raw(self, name: str) -> Any | None:
        from google.api_core.exceptions import NotFound

        try:
            return self.clients.images.get(
                project=self.project, image=name, retry=self.clients.retry
            )
        except NotFound:
            return None

    def query_images(self, query: ImageQuery) -> list[CloudImage]:
        wanted = {k: v for k, v in query.tag_values() if v}
        compute_v1 = compute_sdk.compute_v1()

        request = compute_v1.ListImagesRequest(project=self.project)
        if wanted:
            request.filter = label_filter(wanted)
        found = []
        for raw in self.clients.images.list(request=request, retry=self.clients.retry):
            labels = dict(raw.labels)
            if any(labels.get(k) != v for k, v in to_labels(wanted).items()):
                continue
            if not wanted and gcp_label_key(TAG_STACK) not in labels:
                continue
            image = self._image(raw)
            if query.region and query.region not in raw.storage_locations:
                continue
            found.append(image)
        return sorted(found, key=lambda i: (i.created_at or utcnow(), i.image_id))

    def newest_base_image(self, resolved: ResolvedStack) -> BaseImage:
        """``images.getFromFamily`` in the base image's project: the family's newest
        image that is not deprecated (Compute Engine, "Image families")."""
        from google.api_core.exceptions import NotFound

        settings = SPEC.settings(resolved.stack)
        base = settings.base_image
        try:
            raw = self.clients.images.get_from_family(
                project=base.project, family=base.family, retry=self.clients.retry
            )
        except NotFound:
            raise UserError(
                f"image family {base.family} of project {base.project} (the base image of "
                f"stack {resolved.name}) has no image that is not deprecated",
                hint=f"Check clouds.gcp.base_image, or pin an image with "
                f"{SPEC.base_image_pin_field()}",
            ) from None
        return BaseImage(
            cloud="gcp",
            id=str(raw.name),
            name=f"projects/{base.project}/global/images/{raw.name}",
            created_at=parse_time(raw.creation_timestamp) if raw.creation_timestamp else None,
            query=SPEC.base_image_query(settings),
        )

    def image_identity(self, image: CloudImage) -> str:
        """``gcp/projects/<project>/global/images/<name>@<numeric id>``: a name exists in
        many projects, and a new image can take a deleted one's name; the id cannot."""
        raw = self._get_raw(image.image_id)
        if raw is None or not raw.id:
            raise CloudError(
                f"image {image.image_id} is not in project {self.project}: its full "
                "identity cannot be signed"
            )
        return ImageRef("gcp", raw.name, None, self.project, str(raw.id)).text()

    def get_image(self, image_id: str, region: str) -> CloudImage | None:
        raw = self._get_raw(image_id)
        return self._image(raw) if raw is not None else None

    def set_tags(self, image: CloudImage, tags: dict[str, str]) -> None:
        """Merge ``tags`` into the image's labels. ``setLabels`` replaces the whole set and
        needs the current ``labelFingerprint``, which every label change replaces; a stale
        one is refused with 412 (Compute API reference, GlobalSetLabelsRequest). Several
        regions' threads tag the one promoted image: the calls on an image go one at a
        time here, and a 412 (someone else changed the labels between our read and our
        write) reads the labels and fingerprint again and merges again."""
        from google.api_core.exceptions import PreconditionFailed

        compute_v1 = compute_sdk.compute_v1()

        wanted = {gcp_label_key(k): gcp_label_value(str(v)) for k, v in tags.items()}
        with self._label_lock(image.image_id):
            for attempt in range(1, LABEL_ATTEMPTS + 1):
                raw = self._get_raw(image.image_id)
                if raw is None:
                    raise UserError(f"image {image.image_id} is not in project {self.project}")
                labels = dict(raw.labels)
                if all(labels.get(k) == v for k, v in wanted.items()):
                    return  # already so: no write, no fingerprint to race for
                labels.update(wanted)
                try:
                    op = self.clients.images.set_labels(
                        project=self.project,
                        resource=image.image_id,
                        global_set_labels_request_resource=compute_v1.GlobalSetLabelsRequest(
                            labels=labels, label_fingerprint=raw.label_fingerprint
                        ),
                        retry=self.clients.retry,
                    )
                except PreconditionFailed as exc:
                    if attempt == LABEL_ATTEMPTS:
                        raise CloudError(
                            f"the labels of image {image.image_id} changed under every one "
                            f"of {LABEL_ATTEMPTS} setLabels attempts (412 conditionNotMet: "
                            f"{exc.message})",
                            hint="Something else is relabelling the image; run the command "
                            "again once it stops",
                        ) from exc
                    continue
                self.clients.wait(op)
                return

    def _label_lock(self, name: str) -> threading.Lock:
        with self._label_locks_guard:
            return self._label_locks.setdefault(name, threading.Lock())

    # -- instances -------------------------------------------------------------------------
    def candidate_locations(self, image: CloudImage) -> list[str]:
        """The build zone first, then the other zones of its region that are UP."""
        if self.reservation and self.reservation_zone:  # a reservation lives in one zone
            return [self.reservation_zone]
        if not self.zone:
            raise UserError("the gcp provider needs a zone", hint="Set clouds.gcp.build.zone")
        region = self.zone.rsplit("-", 1)[0]
        zones = [
            z.name
            for z in self.clients.zones.list(project=self.project, retry=self.clients.retry)
            if z.status == "UP" and z.region.rsplit("/", 1)[-1] == region
        ]
        return [self.zone, *sorted(z for z in zones if z != self.zone)]

    def launch(self, request: LaunchRequest) -> Instance:
        compute_v1 = compute_sdk.compute_v1()

        check_cidr(request.allowed_cidr)
        series = launch_settings(request.shape)  # NIC, boot disk type, maintenance of the series
        zone = request.location
        name = resource_name("imagectl", request.stack, secrets.token_hex(3))
        tags = launch_tags(request)
        if request.placement is not None:  # the run's hosts reach each other (NCCL, its bootstrap)
            self._open_peers(request.placement.name, tags[TAG_TTL])
        if request.allowed_cidr:
            self._open_ssh(name, request.allowed_cidr, tags[TAG_TTL])
        # the series' NIC type (A3/A4/G2 take gVNIC only; the API default is VIRTIO_NET)
        nic = compute_v1.NetworkInterface(network=self.network)
        if series.nic_type:
            nic.nic_type = series.nic_type
        if self.subnetwork:
            nic.subnetwork = self.subnetwork
        if request.allowed_cidr:  # the runner reaches it over the internet, from its address only
            nic.access_configs = [
                compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")
            ]
        metadata = [compute_v1.Items(key="block-project-ssh-keys", value="true")]
        if request.ssh_public_key:
            # the run's key is metadata ssh-keys: OS Login, when the project enables it,
            # ignores those ("About OS Login"), so the instance turns it off for itself (an
            # organization's compute.requireOsLogin still wins: doctor says so before spend)
            metadata.append(compute_v1.Items(key="enable-oslogin", value="FALSE"))
            metadata.append(
                compute_v1.Items(
                    key="ssh-keys", value=f"{self.login_user}:{request.ssh_public_key.strip()}"
                )
            )
        resource = compute_v1.Instance(
            name=name,
            machine_type=f"zones/{zone}/machineTypes/{request.shape}",
            disks=[
                compute_v1.AttachedDisk(
                    boot=True,
                    auto_delete=True,
                    initialize_params=compute_v1.AttachedDiskInitializeParams(
                        source_image=f"projects/{self.project}/global/images/{request.image.image_id}",
                        disk_size_gb=self.boot_disk_gb,
                        # a type the series offers (the API default, pd-standard, is not
                        # offered by A3, A4 or G2)
                        disk_type=f"zones/{zone}/diskTypes/{series.boot_disk_type}"
                        if series.boot_disk_type
                        else None,
                    ),
                )
            ],
            network_interfaces=[nic],
            labels=to_labels(tags),
            metadata=compute_v1.Metadata(items=metadata),
            # its own tag (the runner's SSH rule) and, in a multi-node run, the run's
            tags=compute_v1.Tags(
                items=[name, *([request.placement.name] if request.placement else [])]
            ),
            # GPU machine types cannot live-migrate; no service account: no cloud role.
            scheduling=compute_v1.Scheduling(
                on_host_maintenance=series.on_host_maintenance, automatic_restart=False
            ),
            service_accounts=[],
        )
        if request.placement is not None:  # a compact placement policy (gcp/placement.py)
            resource.resource_policies = [request.placement.resource_id]
        if self.reservation:  # ReservationAffinity (Compute API reference)
            resource.reservation_affinity = compute_v1.ReservationAffinity(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[self.reservation],
            )
        try:
            op = self.clients.instances.insert(
                project=self.project,
                zone=zone,
                instance_resource=resource,
                retry=self.clients.retry,
            )
            self.clients.wait(op, zone=zone)
        except CapacityError as exc:
            if request.allowed_cidr:
                self._close_ssh(name)
            if self.reservation:  # "no capacity" names the reservation tried
                raise CapacityError(f"{zone} (reservation {self.reservation})", exc.detail) from exc
            raise
        except Exception:
            if request.allowed_cidr:
                self._close_ssh(name)
            raise
        return self._describe_by_name(zone, name) or Instance(
            cloud="gcp",
            region=zone,
            instance_id=name,
            shape=request.shape,
            image_id=request.image.image_id,
            state="PROVISIONING",
            tags=tags,
        )

    def _open_ssh(self, name: str, cidr: str, expires_at: str) -> None:
        """A rule for this instance alone (its network tag) from the runner's CIDR alone.
        A Firewall has no labels: its description carries the marker and the TTL that
        ``reap_orphans`` reads when a killed run left the rule behind."""
        compute_v1 = compute_sdk.compute_v1()

        firewall = compute_v1.Firewall(
            name=f"{name}-ssh"[:63],
            network=self.network,
            direction="INGRESS",
            source_ranges=[cidr],
            target_tags=[name],
            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=["22"])],
            description=f"{FIREWALL_MARK}: SSH from the runner only; {TAG_TTL}={expires_at}",
        )
        op = self.clients.firewalls.insert(
            project=self.project, firewall_resource=firewall, retry=self.clients.retry
        )
        self.clients.wait(op)

    def _open_peers(self, run: str, expires_at: str) -> None:
        """A multi-node run's one rule admitting all traffic among its hosts (source and
        target: the run's network tag), made by its first launch; nothing from outside
        the run. ``delete_placement`` removes it (also when reap sweeps the placement)."""
        from google.api_core.exceptions import Conflict

        compute_v1 = compute_sdk.compute_v1()
        with self._peers_lock:
            if run in self._peers:
                return
            firewall = compute_v1.Firewall(
                name=f"{run}-peers"[:63],
                network=self.network,
                direction="INGRESS",
                source_tags=[run],
                target_tags=[run],
                allowed=[compute_v1.Allowed(I_p_protocol="all")],
                description=f"{FIREWALL_MARK}: the run's hosts to each other; "
                f"{TAG_TTL}={expires_at}",
            )
            try:
                op = self.clients.firewalls.insert(
                    project=self.project, firewall_resource=firewall, retry=self.clients.retry
                )
                self.clients.wait(op)
            except Conflict:  # made already (a resumed run): it admits the same
                pass
            self._peers.add(run)

    def _close_peers(self, run: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            op = self.clients.firewalls.delete(
                project=self.project, firewall=f"{run}-peers"[:63], retry=self.clients.retry
            )
            self.clients.wait(op)
        except NotFound:
            pass
        with self._peers_lock:
            self._peers.discard(run)

    def _close_ssh(self, name: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            op = self.clients.firewalls.delete(
                project=self.project, firewall=f"{name}-ssh"[:63], retry=self.clients.retry
            )
            self.clients.wait(op)
        except NotFound:
            return

    def reap_orphans(self, *, now: dt.datetime, dry_run: bool = False) -> list[Instance]:
        """imagectl's per-instance SSH rules whose TTL passed and whose instance is gone (a
        run killed before its clean-up): deleted, or listed with ``dry_run``. Returned as
        records of kind ``firewall``. An open rule outliving its instance would admit the
        runner to whatever later wears the same network tag."""
        live = {inst.instance_id for inst in self.list_instances(managed_only=False)}
        out: list[Instance] = []
        for rule in self.clients.firewalls.list(project=self.project, retry=self.clients.retry):
            description = rule.description or ""
            if not description.startswith(FIREWALL_MARK) or not rule.name.endswith("-ssh"):
                continue
            _, _, raw_ttl = description.rpartition(f"{TAG_TTL}=")
            try:
                expires = parse_time(raw_ttl.strip() or None)
            except ValueError:  # not a time imagectl wrote: not known to be expired
                continue
            targets = set(rule.target_tags)
            if expires is None or expires > now or targets & live:
                continue
            record = Instance(
                cloud="gcp",
                region="global",
                instance_id=rule.name,
                shape="firewall",
                image_id="",
                tags={TAG_TTL: raw_ttl.strip()},
            )
            if not dry_run:
                op = self.clients.firewalls.delete(
                    project=self.project, firewall=rule.name, retry=self.clients.retry
                )
                self.clients.wait(op)
            out.append(record)
        return out

    def create_placement(
        self, *, name: str, location: str, shape: str, count: int, tags: dict[str, str]
    ) -> Placement | None:
        return gcp_placement.create(
            self.clients, self.project, name=name, location=location, count=count,
            description=gcp_placement.description(shape, tags),
        )  # fmt: skip

    def delete_placement(self, placement: Placement) -> None:
        gcp_placement.delete(self.clients, self.project, placement)
        self._close_peers(placement.name)

    def list_placements(self) -> list[ManagedPlacement]:
        return gcp_placement.list_managed(self.clients, self.project)

    def _instance(self, raw: Any) -> Instance:
        zone = raw.zone.rsplit("/", 1)[-1]
        address = None
        for nic in raw.network_interfaces:
            for ac in nic.access_configs:
                address = address or ac.nat_i_p or None
            address = address or nic.network_i_p or None
        private = next((nic.network_i_p for nic in raw.network_interfaces), None) or None
        tags = from_labels(dict(raw.labels))
        source = "" if TAG_IMAGE in tags else self._boot_image(raw)
        return Instance(
            cloud="gcp",
            region=zone,
            instance_id=raw.name,
            shape=raw.machine_type.rsplit("/", 1)[-1],
            image_id=tags.get(TAG_IMAGE, source),
            state=raw.status,
            address=address,
            tags=tags,
            launched_at=parse_time(raw.creation_timestamp) if raw.creation_timestamp else None,
            private_address=private,
        )

    def _boot_image(self, raw: Any) -> str:
        """The image of an instance's boot disk. An instance GET never returns
        ``initializeParams`` ("[Input Only]" in the Compute API): the image is the boot
        disk's ``sourceImage``, read from the disk the instance names."""
        from google.api_core.exceptions import NotFound

        for disk in raw.disks:
            if not disk.boot or not disk.source:
                continue
            parts = disk.source.split("/")
            zone, name = parts[parts.index("zones") + 1], parts[-1]
            try:
                found = self.clients.disks.get(
                    project=self.project, zone=zone, disk=name, retry=self.clients.retry
                )
            except NotFound:
                return ""
            return str(found.source_image).rsplit("/", 1)[-1]
        return ""

    def _describe_by_name(self, zone: str, name: str) -> Instance | None:
        from google.api_core.exceptions import NotFound

        try:
            raw = self.clients.instances.get(
                project=self.project, zone=zone, instance=name, retry=self.clients.retry
            )
        except NotFound:
            return None
        return self._instance(raw)

    def wait_reachable(self, instance: Instance, *, timeout_s: float) -> Instance:
        deadline = time.monotonic() + timeout_s
        while True:
            current = self._describe_by_name(instance.region, instance.instance_id)
            if current is None or current.state in ("STOPPING", "TERMINATED", "SUSPENDED"):
                state = current.state if current else "gone"
                raise NotReachable(instance.instance_id, f"the instance is {state}")
            if current.state == "RUNNING":
                return current
            if time.monotonic() >= deadline:
                raise NotReachable(
                    instance.instance_id, f"still {current.state} after {timeout_s:.0f} s"
                )
            time.sleep(self.poll_interval_s)

    def terminate(self, instance: Instance) -> None:
        from google.api_core.exceptions import NotFound

        try:
            op = self.clients.instances.delete(
                project=self.project,
                zone=instance.region,
                instance=instance.instance_id,
                retry=self.clients.retry,
            )
            self.clients.wait(op, zone=instance.region)
        except NotFound:
            pass
        self._close_ssh(instance.instance_id)

    def list_instances(self, *, managed_only: bool = True) -> list[Instance]:
        compute_v1 = compute_sdk.compute_v1()

        request = compute_v1.AggregatedListInstancesRequest(project=self.project)
        if managed_only:
            request.filter = label_filter({TAG_MANAGED: "true"})
        found = []
        for _scope, scoped in self.clients.instances.aggregated_list(
            request=request, retry=self.clients.retry
        ):
            for raw in scoped.instances:
                inst = self._instance(raw)
                if managed_only and inst.tags.get(TAG_MANAGED) != "true":
                    continue
                if inst.state in ("STOPPING", "TERMINATED"):
                    continue
                found.append(inst)
        return found


def create_provider(options: GcpOptions) -> GcpProvider:
    return GcpProvider(options)
