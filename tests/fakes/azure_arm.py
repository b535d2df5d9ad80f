"""A local Azure Resource Manager (ARM) API for ``azure-mgmt-compute`` / ``-network``.

Seeding::

    fake = FakeAzureArm(subscription="00000000-0000-0000-0000-000000000000").start()
    version_id = fake.add_gallery_image_version(
        "imagectl-images", "imagectl_gallery", "h100-training", "2026.1122.42530",
        location="eastus", tags={"imagectl:stack": "h100-training"},
        exclude_from_latest=True)
    ComputeManagementClient(credential, subscription, base_url=fake.endpoint)

Faults (each returns the ``Fault`` rule or nothing)::

    fake.throttle(2)                        # next 2 requests: 429 with Retry-After: 0
    fake.capacity_error("eastus", zone="1") # VM PUTs there: 409 SkuNotAvailable
    fake.quota_error()                      # VM PUTs: 409 QuotaExceeded
    fake.allocation_failure("eastus")       # VM PUT accepted (201), its operation Failed
    fake.never_running()                    # VMs stay PowerState/starting
    fake.fail_replication("westus3")        # replication to that region ends Failed
    fake.heal_replication("westus3")        # later attempts there succeed

Everything is kept as ARM JSON (``id``, ``name``, ``type``, ``location``, ``tags``,
``properties``) in ``fake.resources`` keyed by the lower-cased resource id. PUT, PATCH
and DELETE are long-running: 201/202 with an ``Azure-AsyncOperation`` header whose
status is InProgress until polled ``op_polls`` times, then Succeeded (or Failed with
an error); the resource's ``provisioningState`` follows. Gallery image versions report
``replicationStatus`` (with ``$expand=ReplicationStatus``): each target region is
Replicating for ``replication_polls`` reads, then Completed. A replication that failed
stays Failed after ``heal_replication`` (as in Azure): only a new attempt, the region
removed from ``targetRegions`` and added again, replicates it.

Booting guests: given a ``GuestHost`` (``FakeAzureArm(guests=host)``), a public IP
address gets the guest address ``127.0.0.N`` when it is created, and a created VM boots a
QEMU guest when its PUT succeeds, with Azure's semantics: the Linux provisioning agent
creates ``osProfile.adminUsername`` with the keys of ``linuxConfiguration.ssh.
publicKeys`` (``_azure_logins``), reachable at the public IP of its NIC as the NSGs of
that NIC and of its subnet admit (``nsg_admits``); deleting the VM stops it.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import re
from typing import Any
from urllib.parse import urlencode

from tests.fakes.guests import GuestHost, cidr_admits, port_in
from tests.fakes.server import FakeServer, Request, Response

SUB = "/subscriptions/(?P<sub>[^/]+)"
RG = SUB + "/resourceGroups/(?P<rg>[^/]+)"
RESOURCE = RG + "/providers/(?P<rest>.+)"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


VERSIONS = "microsoft.compute/galleries/images/versions"
VMS = "microsoft.compute/virtualmachines"
PIPS = "microsoft.network/publicipaddresses"
PPGS = "microsoft.compute/proximityplacementgroups"
# ARM answers a gallery version's target regions with the region's display name
# ("West US 3"), whatever name the request used (``az account list-locations``:
# ``name`` -> ``displayName``).
DISPLAY_NAMES = {
    "eastus": "East US",
    "eastus2": "East US 2",
    "westus2": "West US 2",
    "westus3": "West US 3",
    "southcentralus": "South Central US",
    "northeurope": "North Europe",
    "westeurope": "West Europe",
}


def region_key(name: str) -> str:
    return name.replace(" ", "").lower()


def display_name(name: str) -> str:
    return DISPLAY_NAMES.get(region_key(name), name)


def arm_error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


# Where ARM answers a long-running operation's status (its ``Azure-AsyncOperation`` /
# ``Location`` URL), by the kind of resource written: Compute Gallery resources under
# ``Microsoft.Compute/locations/{loc}/capsOperations``, managed disks and snapshots under
# ``.../diskOperations``, other Compute resources (VMs) under ``.../operations``, network
# resources under ``Microsoft.Network/locations/{loc}/operations``. Reading one is the
# RBAC read of that operation type ("Azure resource provider operations":
# Microsoft.Compute/locations/capsOperations/read "Gets the status of an asynchronous
# Caps operation", locations/diskOperations/read, locations/operations/read;
# Microsoft.Network/locations/operations/read; the built-in role "Compute Gallery
# Artifacts Publisher" grants locations/capsOperations/read for its gallery writes).
OPERATION_KINDS = ("capsOperations", "diskOperations", "operations")


def operation_kind(resource_type: str) -> tuple[str, str]:
    """(provider namespace, operations collection) of a resource type's operations."""
    rtype = resource_type.lower()
    if rtype.startswith("microsoft.compute/galleries"):
        return "Microsoft.Compute", "capsOperations"
    if rtype.startswith(("microsoft.compute/disks", "microsoft.compute/snapshots")):
        return "Microsoft.Compute", "diskOperations"
    if rtype.startswith("microsoft.network/"):
        return "Microsoft.Network", "operations"
    return "Microsoft.Compute", "operations"


def operation_url(endpoint: str, subscription: str, rtype: str, location: str, op: str) -> str:
    namespace, kind = operation_kind(rtype)
    loc = region_key(location or "eastus")
    return (
        f"{endpoint}/subscriptions/{subscription}/providers/{namespace}/locations/{loc}/"
        f"{kind}/{op}?api-version=2024-03-02"
    )


class FakeAzureArm(FakeServer):
    def __init__(
        self,
        subscription: str = "00000000-0000-0000-0000-000000000000",
        *,
        op_polls: int = 1,
        replication_polls: int = 1,
        boot_polls: int = 1,
        page_size: int = 2,
        guests: GuestHost | None = None,
    ) -> None:
        super().__init__()
        self.guests = guests
        self.subscription = subscription
        # Lists page as ARM does ("value" + "nextLink", Azure REST API guidelines, "Paged
        # results"); two per page so every listing crosses a page boundary in tests.
        self.page_size = page_size
        self.op_polls = op_polls
        self.replication_polls = replication_polls
        self.boot_polls = boot_polls
        self.resources: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.sharing: dict[str, list[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._capacity: dict[tuple[str, str | None], int | None] = {}
        self._quota: list[int | None] = []
        self._allocation: dict[str, list[Any]] = {}  # location -> [code, times left]
        self._reservations: dict[str, dict[str, Any]] = {}  # group key -> reserved VMs
        self._never_running = False
        self._failed_regions: set[str] = set()
        self._failed_replicas: set[tuple[str, str]] = set()  # (version key, region)
        self._replication_reads: dict[tuple[str, str], int] = {}
        self._boot_reads: dict[str, int] = {}
        # marketplace image versions: (location, publisher, offer, sku) -> versions
        self.vm_images: dict[tuple[str, str, str, str], list[str]] = {}
        r = self.route
        r(
            "GET",
            SUB
            + "/providers/(?P<ns>[^/]+)/locations/(?P<loc>[^/]+)/(?P<kind>"
            + "|".join(OPERATION_KINDS)
            + ")/(?P<op>[^/]+)",
            self._get_operation,
        )
        r(
            "GET",
            SUB + "/providers/Microsoft.Compute/locations/(?P<loc>[^/]+)/publishers/(?P<pub>[^/]+)"
            "/artifacttypes/vmimage/offers/(?P<offer>[^/]+)/skus/(?P<sku>[^/]+)/versions",
            self._list_vm_image_versions,
        )
        r("POST", RESOURCE + "/share", self._share)
        r("GET", RESOURCE + "/instanceView", self._instance_view)
        r("GET", SUB + "/providers/Microsoft.Compute/virtualMachines", self._list_all_vms)
        r("PUT", RESOURCE, self._put)
        r("PATCH", RESOURCE, self._patch)
        r("GET", RESOURCE, self._get)
        r("DELETE", RESOURCE, self._delete)

    # -- ids ------------------------------------------------------------------------------
    def rid(self, rg: str, rest: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{rg}/providers/{rest}"

    @staticmethod
    def _key(path: str) -> str:
        return path.rstrip("/").lower()

    @staticmethod
    def _type_of(rest: str) -> str:
        parts = rest.split("/")
        ns = parts[0]
        types = parts[1::2]
        return "/".join([ns, *types])

    # -- seeding --------------------------------------------------------------------------
    def add_gallery_image_version(
        self,
        rg: str,
        gallery: str,
        definition: str,
        version: str,
        *,
        location: str = "eastus",
        tags: dict[str, str] | None = None,
        exclude_from_latest: bool = True,
        target_regions: list[str] | None = None,
        published: str | None = None,
        end_of_life: str | None = None,
    ) -> str:
        rest = f"Microsoft.Compute/galleries/{gallery}/images/{definition}/versions/{version}"
        rid = self.rid(rg, rest)
        regions = target_regions or [location]
        body = {
            "id": rid,
            "name": version,
            "type": "Microsoft.Compute/galleries/images/versions",
            "location": location,
            "tags": dict(tags or {}),
            "properties": {
                "publishingProfile": {
                    "targetRegions": [
                        {
                            "name": display_name(r),
                            "regionalReplicaCount": 1,
                            "storageAccountType": "Standard_LRS",
                        }
                        for r in regions
                    ],
                    "excludeFromLatest": exclude_from_latest,
                    "publishedDate": published or _now(),
                    **({"endOfLifeDate": end_of_life} if end_of_life else {}),
                },
                "storageProfile": {"osDiskImage": {"sizeInGB": 64}},
                "provisioningState": "Succeeded",
            },
        }
        with self.lock:
            self._ensure_parents(rg, gallery, definition, location)
            self.resources[self._key(rid)] = body
            for region in regions:  # seeded versions are already replicated
                self._replication_reads[(self._key(rid), region_key(region))] = 10**6
        return rid

    def add_gallery(self, rg: str, gallery: str, *, location: str = "eastus") -> str:
        """A gallery without image definitions (what `az sig create` leaves)."""
        rest = f"Microsoft.Compute/galleries/{gallery}"
        rid = self.rid(rg, rest)
        with self.lock:
            self.resources.setdefault(self._key(rid), {
                "id": rid, "name": gallery, "type": "Microsoft.Compute/galleries",
                "location": location, "properties": {"provisioningState": "Succeeded"},
            })  # fmt: skip
        return rid

    def _ensure_parents(self, rg: str, gallery: str, definition: str, location: str) -> None:
        for rest, rtype in (
            (f"Microsoft.Compute/galleries/{gallery}", "Microsoft.Compute/galleries"),
            (
                f"Microsoft.Compute/galleries/{gallery}/images/{definition}",
                "Microsoft.Compute/galleries/images",
            ),
        ):
            rid = self.rid(rg, rest)
            props: dict[str, Any] = {"provisioningState": "Succeeded"}
            if rtype.endswith("/images"):  # the definition a build made: Gen2, Standard
                props.update(
                    osType="Linux",
                    osState="Generalized",
                    hyperVGeneration="V2",
                    identifier={"publisher": "imagectl", "offer": gallery, "sku": definition},
                )
            self.resources.setdefault(
                self._key(rid),
                {
                    "id": rid,
                    "name": rest.rsplit("/", 1)[-1],
                    "type": rtype,
                    "location": location,
                    "properties": props,
                },
            )

    # -- faults ---------------------------------------------------------------------------
    def throttle(self, times: int = 1, *, method: str | None = None, path: str = "") -> Any:
        body = arm_error("TooManyRequests", "The request is being throttled.")
        return self.add_fault(
            lambda r: (429, body, {"Retry-After": "0"}), method=method, path=path, times=times
        )

    def capacity_error(
        self, location: str, *, zone: str | None = None, times: int | None = None
    ) -> None:
        self._capacity[(location.lower(), zone)] = times

    def quota_error(self, times: int | None = None) -> None:
        self._quota.append(times)

    def add_capacity_reservation(
        self, rg: str, group: str, *, location: str, size: str, count: int, zone: str | None = None
    ) -> str:
        """A capacity reservation group holding one reservation of ``count`` VMs of
        ``size`` (in ``zone``); returns the group's id. A VM placed in the group within
        the reserved quantity is allocated even where on-demand capacity is exhausted (the
        point of the reservation); beyond it Azure overallocates, subject to capacity as
        any on-demand VM ("Overallocating capacity reservation", Microsoft Learn)."""
        rid = self.rid(rg, f"Microsoft.Compute/capacityReservationGroups/{group}")
        self.resources[self._key(rid)] = {
            "id": rid,
            "name": group,
            "type": "Microsoft.Compute/capacityReservationGroups",
            "location": location,
            "zones": [zone] if zone else [],
            "properties": {"provisioningState": "Succeeded"},
        }
        self._reservations[self._key(rid)] = {"size": size, "count": count, "used": 0, "zone": zone}
        return rid

    def _reserved(self, body: dict[str, Any]) -> Response | bool:
        """True when the VM takes a reserved slot; an error for a group it cannot use."""
        ref = body.get("properties", {}).get("capacityReservation", {})
        group_id = (ref.get("capacityReservationGroup") or {}).get("id")
        if not group_id:
            return False
        group = self.resources.get(self._key(group_id))
        if group is None:
            return 404, self.not_found(group_id), {}
        held = self._reservations[self._key(group_id)]
        size = body.get("properties", {}).get("hardwareProfile", {}).get("vmSize", "")
        zones = body.get("zones") or []
        location = str(body.get("location", "")).lower()
        if (
            location != group["location"].lower()
            or size != held["size"]
            or (held["zone"] and zones != [held["zone"]])
        ):
            msg = (
                f"The VM (size {size}, location {location}, zones {zones}) does not match a "
                f"capacity reservation in group {group_id} (size {held['size']}, location "
                f"{group['location']}, zone {held['zone']})."
            )
            return 400, arm_error("InvalidParameter", msg), {}
        if held["used"] < held["count"]:
            held["used"] += 1
            return True
        return False  # overallocated: allocated like an on-demand VM

    def allocation_failure(
        self, location: str, code: str = "AllocationFailed", *, times: int | None = None
    ) -> None:
        """VM PUTs in ``location`` are accepted (201 Creating) and their long-running
        operation then ends Failed with ``code`` (AllocationFailed, ZonalAllocationFailed,
        OverconstrainedAllocationRequest...): Azure allocates after accepting the request
        ("Troubleshoot allocation failures when you create, restart, or resize VMs in
        Azure"); the VM is left in provisioningState Failed."""
        self._allocation[location.lower()] = [code, times]

    def _allocation_error(self, body: dict[str, Any]) -> dict[str, Any] | None:
        entry = self._allocation.get(str(body.get("location", "")).lower())
        if entry is None or entry[1] == 0:
            return None
        if entry[1] is not None:
            entry[1] -= 1
        size = body.get("properties", {}).get("hardwareProfile", {}).get("vmSize", "")
        message = (
            f"Allocation failed. We do not have sufficient capacity for the requested VM size "
            f"{size} in this region. Read more about improving likelihood of allocation "
            "success at http://aka.ms/allocation-guidance"
        )
        return {"code": entry[0], "message": message}

    def never_running(self) -> None:
        self._never_running = True

    def fail_replication(self, region: str) -> None:
        self._failed_regions.add(region_key(region))

    def heal_replication(self, region: str) -> None:
        """New replications to ``region`` succeed; those that failed stay failed."""
        self._failed_regions.discard(region_key(region))

    def _retarget(self, key: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
        """A region dropped from the target list loses its replica and its history."""
        kept = {region_key(t["name"]) for t in new}
        for target in old:
            region = region_key(target["name"])
            if region not in kept:
                self._failed_replicas.discard((key, region))
                self._replication_reads.pop((key, region), None)

    # -- long-running operations -----------------------------------------------------------
    def _start_op(self, target: str, finish: Any, error: dict[str, Any] | None = None) -> str:
        op_id = f"op-{next(self._ids):06d}"
        self.operations[op_id] = {
            "name": op_id,
            "status": "InProgress",
            "startTime": _now(),
            "polls": 0,
            "target": target,
            "finish": finish,
            "error": error,
        }
        if self.op_polls <= 0:
            self._complete(op_id)
        return op_id

    def _complete(self, op_id: str) -> None:
        op = self.operations[op_id]
        if op["status"] != "InProgress":
            return
        op["finish"]()
        op["status"] = "Failed" if op["error"] else "Succeeded"
        op["endTime"] = _now()

    def _op_headers(self, op_id: str) -> dict[str, str]:
        """Where the operation is polled: under its resource provider and location, in the
        collection of its kind (``operation_url``)."""
        op = self.operations[op_id]
        res = self.resources.get(op["target"]) or op.get("resource") or {}
        url = operation_url(
            self.endpoint, self.subscription, str(res.get("type", "")),
            str(res.get("location") or "eastus"), op_id,
        )  # fmt: skip
        op["path"] = url.split("?", 1)[0][len(self.endpoint) :]
        return {"Azure-AsyncOperation": url, "Retry-After": "0"}

    def add_vm_image_version(
        self, location: str, publisher: str, offer: str, sku: str, version: str
    ) -> None:
        """A marketplace image version (publisher:offer:sku:version) offered in ``location``."""
        key = tuple(x.lower() for x in (location, publisher, offer, sku))
        with self.lock:
            self.vm_images.setdefault(key, []).append(version)  # type: ignore[arg-type]

    def _list_vm_image_versions(self, req: Request) -> Response:
        """Virtual Machine Images - List (Compute REST API): a JSON array, not a ``value``
        page, of ``{location, name, id}``; ``$top`` and ``$orderby=name`` honoured; an
        unknown publisher, offer or SKU is 404 NotFound."""
        m = req.match
        key = tuple(m[k].lower() for k in ("loc", "pub", "offer", "sku"))
        versions = self.vm_images.get(key)  # type: ignore[call-overload]
        if versions is None:
            return 404, arm_error("NotFound", "Artifact: VMImage was not found."), {}
        names = list(versions)
        if req.query.get("$orderby", "").lower().startswith("name"):
            names.sort(key=lambda v: tuple(int(p) for p in v.split(".")),
                       reverse=req.query["$orderby"].lower().endswith(" desc"))  # fmt: skip
        if "$top" in req.query:
            names = names[: int(req.query["$top"])]
        base = (
            f"/Subscriptions/{m['sub']}/Providers/Microsoft.Compute/Locations/{m['loc']}"
            f"/Publishers/{m['pub']}/ArtifactTypes/VMImage/Offers/{m['offer']}/Skus/{m['sku']}"
        )
        body = [{"location": m["loc"], "name": v, "id": f"{base}/Versions/{v}"} for v in names]
        return 200, body, {}

    def _get_operation(self, req: Request) -> Response:
        op = self.operations.get(req.match["op"])
        if op is None or str(op.get("path", "")).lower() != req.path.lower():
            # an operation is answered only where it was announced: its provider, location
            # and kind (a gallery write is not at locations/operations)
            return 404, arm_error("NotFound", "operation not found"), {}
        op["polls"] += 1
        if op["polls"] >= self.op_polls:
            self._complete(req.match["op"])
        body = {k: op[k] for k in ("name", "status", "startTime") if k in op}
        if op["status"] == "Failed":
            body["error"] = op["error"]
        return 200, body, {"Retry-After": "0"}

    def _advance(self, key: str) -> None:
        for op_id, op in list(self.operations.items()):
            if op["target"] == key and op["status"] == "InProgress":
                op["polls"] += 1
                if op["polls"] >= self.op_polls:
                    self._complete(op_id)

    # -- generic resources -----------------------------------------------------------------
    def not_found(self, path: str) -> Any:
        return arm_error("ResourceNotFound", f"The Resource '{path}' was not found.")

    def _collection(self, req: Request) -> Response | None:
        """GET of a collection: an even number of segments after the namespace."""
        rest = req.match["rest"].rstrip("/")
        if len(rest.split("/")) % 2 == 0:
            prefix = self._key(req.path) + "/"
            items = [
                self._view(k, req)
                for k in list(self.resources)
                if k.startswith(prefix) and "/" not in k[len(prefix) :]
            ]
            return self._page(req, items)
        return None

    def _page(self, req: Request, items: list[dict[str, Any]]) -> Response:
        """One page of ``items``; ``nextLink`` is the absolute URL of the next page (the
        same query plus ``$skiptoken``), absent on the last page."""
        start = int(req.query.get("$skiptoken") or 0)
        end = start + self.page_size
        body: dict[str, Any] = {"value": items[start:end]}
        if end < len(items):
            query = {k: v for k, v in req.query.items() if k != "$skiptoken"}
            query["$skiptoken"] = str(end)
            body["nextLink"] = f"{self.endpoint}{req.path}?{urlencode(query)}"
        return 200, body, {}

    def _view(self, key: str, req: Request) -> dict[str, Any]:
        res = self.resources[key]
        out = copy.deepcopy(res)
        if res["type"].lower() == PPGS:
            out["properties"]["virtualMachines"] = [
                {"id": str(vm["id"])} for vm in self._ppg_members(key)
            ]
        if res["type"].lower() == VERSIONS:
            replication = self._replication(key, res)
            out["properties"]["provisioningState"] = self._version_state(res, replication)
            expand = req.query.get("$expand", "")
            if expand.lower() == "replicationstatus":
                out["properties"]["replicationStatus"] = replication
        return out

    @staticmethod
    def _version_state(res: dict[str, Any], replication: dict[str, Any]) -> str:
        """A version is ``Updating`` while any target region replicates, and ``Failed``
        when one failed, whatever its last write's operation said."""
        state = str(res["properties"].get("provisioningState", "Succeeded"))
        if state != "Succeeded":
            return state
        return {"InProgress": "Updating", "Failed": "Failed"}.get(
            replication["aggregatedState"], state
        )

    def _busy(self, key: str) -> Response | None:
        """ARM refuses a second write to a gallery version while it is being updated."""
        res = self.resources.get(key)
        if res is None or res["type"].lower() != VERSIONS:
            return None
        state = self._version_state(res, self._replication(key, res, read=False))
        if state in ("Creating", "Updating", "Deleting"):
            msg = (
                f"Operation on gallery image version '{res['name']}' is not allowed while it "
                f"is in provisioning state '{state}'. Retry after the operation completes."
            )
            return 409, arm_error("OperationNotAllowed", msg), {}
        return None

    def _replication(self, key: str, res: dict[str, Any], read: bool = True) -> dict[str, Any]:
        summary = []
        for target in res["properties"]["publishingProfile"].get("targetRegions", []):
            region = region_key(target["name"])
            before = self._replication_reads.get((key, region), 0)
            reads = before + (1 if read else 0)
            self._replication_reads[(key, region)] = reads
            done = before > self.replication_polls  # a finished replica stays finished
            if region in self._failed_regions and not done:
                self._failed_replicas.add((key, region))
            if (key, region) in self._failed_replicas:
                state, progress = "Failed", 0
            elif reads > self.replication_polls:
                state, progress = "Completed", 100
            else:
                state, progress = "Replicating", 50
            summary.append(
                {"region": display_name(target["name"]), "state": state, "progress": progress}
            )
        states = {s["state"] for s in summary}
        aggregated = (
            "Failed"
            if "Failed" in states
            else "InProgress"
            if "Replicating" in states
            else "Completed"
        )
        return {"aggregatedState": aggregated, "summary": summary}

    def _get(self, req: Request) -> Response:
        listed = self._collection(req)
        if listed is not None:
            return listed
        key = self._key(req.path)
        if key not in self.resources:
            return 404, self.not_found(req.path), {}
        self._advance(key)
        if key not in self.resources:
            return 404, self.not_found(req.path), {}
        return 200, self._view(key, req), {}

    def _put(self, req: Request) -> Response:
        key = self._key(req.path)
        rest = req.match["rest"]
        body = copy.deepcopy(req.body or {})
        rtype = self._type_of(rest)
        if rtype.lower() == "microsoft.compute/virtualmachines":
            refused = (self._vm_admission(body, rest) or _os_profile_refusal(body)
                       or self._ppg_refusal(body))  # fmt: skip
            if refused is not None:
                return refused
        if rtype.lower() == PPGS:
            return self._put_ppg(req, key, rest, body)
        busy = self._busy(key)
        if busy is not None:
            return busy
        existing = self.resources.get(key)
        created = existing is None
        res = existing or {
            "id": self.rid(req.match["rg"], rest),
            "name": rest.rsplit("/", 1)[-1],
            "type": rtype,
        }
        props = body.pop("properties", {}) or {}
        res.update(body)
        res["properties"] = props if created else _merge(res.get("properties", {}), props)
        self._decorate(res, created)
        res["properties"]["provisioningState"] = "Creating" if created else "Updating"
        self.resources[key] = res

        failure = None
        if rtype.lower() == "microsoft.compute/virtualmachines" and created:
            failure = self._allocation_error(res)

        def finish() -> None:
            if key in self.resources:
                state = "Failed" if failure else "Succeeded"
                self.resources[key]["properties"]["provisioningState"] = state
                if created and not failure and rtype.lower() == VMS:
                    self._boot(key)

        op_id = self._start_op(key, finish, failure)
        # Disks - Create Or Update answers 202 Accepted, not 201 (Compute REST API)
        status = 202 if created and operation_kind(rtype)[1] == "diskOperations" else (
            201 if created else 200)  # fmt: skip
        return status, copy.deepcopy(res), self._op_headers(op_id)

    def _patch(self, req: Request) -> Response:
        key = self._key(req.path)
        if key not in self.resources:
            return 404, self.not_found(req.path), {}
        busy = self._busy(key)
        if busy is not None:
            return busy
        res = self.resources[key]
        body = copy.deepcopy(req.body or {})
        if "tags" in body:
            res["tags"] = body.pop("tags") or {}
        props = body.pop("properties", {}) or {}
        publishing = props.get("publishingProfile", {})
        if "targetRegions" in publishing:  # a list replaces, it does not merge
            profile = res["properties"].setdefault("publishingProfile", {})
            new_targets = [
                {**t, "name": display_name(t["name"])} for t in publishing.pop("targetRegions")
            ]
            self._retarget(key, profile.get("targetRegions", []), new_targets)
            profile["targetRegions"] = new_targets
        _merge(res["properties"], props)
        res["properties"]["provisioningState"] = "Updating"

        def finish() -> None:
            if key in self.resources:
                self.resources[key]["properties"]["provisioningState"] = "Succeeded"

        op_id = self._start_op(key, finish)
        return 200, copy.deepcopy(res), self._op_headers(op_id)

    def _delete(self, req: Request) -> Response:
        key = self._key(req.path)
        if key not in self.resources:
            return 204, None, {}
        if str(self.resources[key].get("type", "")).lower() == PPGS:
            return self._delete_ppg(key)
        self.resources[key]["properties"]["provisioningState"] = "Deleting"

        def finish() -> None:
            gone = self.resources.pop(key, None) or {}
            for other in [k for k in self.resources if k.startswith(key + "/")]:
                self.resources.pop(other, None)
            if self.guests is not None and str(gone.get("type", "")).lower() == VMS:
                self.guests.stop(key)
            address = gone.get("properties", {}).get("ipAddress")
            if self.guests is not None and address and str(gone.get("type", "")).lower() == PIPS:
                self.guests.release_address(address)

        op_id = self._start_op(key, finish)
        self.operations[op_id]["resource"] = copy.deepcopy(self.resources.get(key, {}))
        headers = self._op_headers(op_id)
        headers["Location"] = headers["Azure-AsyncOperation"]
        return 202, None, headers

    def _decorate(self, res: dict[str, Any], created: bool) -> None:
        rtype = res["type"].lower()
        props = res["properties"]
        if rtype == "microsoft.compute/virtualmachines" and created:
            props["vmId"] = f"vm-{next(self._ids):08d}"
            props["timeCreated"] = _now()
            self._boot_reads[self._key(res["id"])] = 0
            # A VM made from an image definition id keeps that id; ARM reports the version
            # it resolved to in the read-only ``exactVersion`` (ImageReference).
            ref = props.get("storageProfile", {}).get("imageReference", {})
            image_id = str(ref.get("id", ""))
            if image_id and "/versions/" not in image_id.lower():
                latest = self._latest_version(image_id)
                if latest:
                    ref["exactVersion"] = latest
        elif rtype == "microsoft.network/networkinterfaces" and created:
            n = next(self._ids) % 250 + 4
            for cfg in props.get("ipConfigurations", []):
                cfg.setdefault("properties", {})["privateIPAddress"] = f"10.42.0.{n}"
        elif rtype == "microsoft.network/publicipaddresses" and created:
            if self.guests is not None:  # the address its VM's guest answers on
                props["ipAddress"] = self.guests.reserve_address(res["id"])
            else:
                props["ipAddress"] = f"198.51.100.{next(self._ids) % 250 + 4}"
        elif rtype == "microsoft.compute/galleries/images/versions":
            props.setdefault("publishingProfile", {}).setdefault("publishedDate", _now())

    # proximity placement groups (Microsoft.Compute/proximityPlacementGroups, REST: Create
    # Or Update / Delete answer at once, 200/201 and 200; "Proximity placement groups":
    # a VM in a group is in the group's location; a group VMs reference is not deleted;
    # Get and List By Resource Group (paged, nextLink) answer the read-only
    # properties.virtualMachines, the VMs in the group, by id)
    def _put_ppg(self, req: Request, key: str, rest: str, body: dict[str, Any]) -> Response:
        props = body.get("properties") or {}
        kind = props.get("proximityPlacementGroupType")
        if kind not in ("Standard", "Ultra") or not body.get("location"):
            return 400, arm_error("InvalidParameter", f"proximityPlacementGroupType {kind!r} "
                                  "or location is not valid"), {}  # fmt: skip
        created = key not in self.resources
        name = rest.rsplit("/", 1)[-1]
        res = self.resources.get(key) or {"id": self.rid(req.match["rg"], rest), "name": name,
                                          "type": PPGS}  # fmt: skip
        res.update({**body, "properties": {"proximityPlacementGroupType": kind}})
        self.resources[key] = res
        return (201 if created else 200), copy.deepcopy(res), {}

    def _ppg_members(self, key: str) -> list[dict[str, Any]]:
        return [r for r in self.resources.values()
                if str(r.get("type", "")).lower() == VMS
                and self._key(str(((r.get("properties") or {}).get("proximityPlacementGroup")
                                   or {}).get("id", ""))) == key]  # fmt: skip

    def _ppg_users(self, key: str) -> list[str]:
        return [str(r.get("name")) for r in self._ppg_members(key)]

    def _ppg_refusal(self, body: dict[str, Any]) -> Response | None:
        ref = ((body.get("properties") or {}).get("proximityPlacementGroup") or {}).get("id")
        if not ref:
            return None
        group = self.resources.get(self._key(str(ref)))
        if group is None:
            return 404, arm_error("NotFound", f"Proximity placement group {ref} not found"), {}
        if str(group.get("location", "")).lower() != str(body.get("location", "")).lower():
            where = group.get("location")
            msg = f"The VM must be in the proximity placement group's location {where}"
            return 400, arm_error("InvalidParameter", msg), {}
        return None

    def _delete_ppg(self, key: str) -> Response:
        users = self._ppg_users(key)
        if users:
            msg = f"The proximity placement group is referenced by VMs: {', '.join(users)}"
            return 409, arm_error("OperationNotAllowed", msg), {}
        self.resources.pop(key, None)
        return 200, None, {}

    def _vm_admission(self, body: dict[str, Any], rest: str) -> Response | None:
        reserved = self._reserved(body)
        if isinstance(reserved, tuple):
            return reserved
        if reserved:
            return None
        location = str(body.get("location", "")).lower()
        zones = body.get("zones") or [None]
        size = body.get("properties", {}).get("hardwareProfile", {}).get("vmSize", "")
        for zone in zones:
            for key in ((location, zone), (location, None)):
                if key in self._capacity and self._capacity[key] != 0:
                    left = self._capacity[key]
                    self._capacity[key] = None if left is None else left - 1
                    where = f"location '{location}'" + (f" zones '{zone}'" if zone else "")
                    msg = (
                        f"The requested VM size for resource 'Following SKUs have failed for "
                        f"Capacity Restrictions: {size}' is currently not available in {where} "
                        "for subscription. Please try another size or deploy to a different "
                        "location or different zone."
                    )
                    return 409, arm_error("SkuNotAvailable", msg), {}
        if self._quota and self._quota[0] != 0:
            left = self._quota[0]
            self._quota[0] = None if left is None else left - 1
            msg = (
                "Operation could not be completed as it results in exceeding approved "
                "standardNDSH100v5Family Cores quota. Location: " + location
            )
            return 409, arm_error("QuotaExceeded", msg), {}
        image = (
            body.get("properties", {}).get("storageProfile", {}).get("imageReference", {}).get("id")
        )
        if image and self._key(image) not in self.resources:
            return 404, arm_error("GalleryImageNotFound", f"image {image} not found"), {}
        return None

    # -- booting guests --------------------------------------------------------------------
    def _get_ref(self, ref: dict[str, Any] | None) -> dict[str, Any] | None:
        rid = (ref or {}).get("id")
        return self.resources.get(self._key(rid)) if rid else None

    def _subnet(self, subnet_id: str) -> dict[str, Any] | None:
        """A subnet, stored itself or inline in its virtual network's ``subnets``."""
        found = self.resources.get(self._key(subnet_id))
        if found is not None:
            return found
        vnet_id, _, name = subnet_id.rpartition("/subnets/")
        vnet = self.resources.get(self._key(vnet_id)) or {}
        for subnet in vnet.get("properties", {}).get("subnets", []):
            if str(subnet.get("name", "")).lower() == name.lower():
                return dict(subnet)
        return None

    def _public_front(self, vm: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
        """(public address, its IP configuration, its NIC) of each NIC of the VM."""
        fronts = []
        for ref in vm.get("properties", {}).get("networkProfile", {}).get("networkInterfaces", []):
            nic = self._get_ref(ref)
            for cfg in (nic or {}).get("properties", {}).get("ipConfigurations", []):
                pip = self._get_ref(cfg.get("properties", {}).get("publicIPAddress"))
                address = (pip or {}).get("properties", {}).get("ipAddress")
                if pip and address:
                    fronts.append((address, cfg, nic))
        return fronts

    def _boot(self, key: str) -> None:
        if self.guests is None:
            return
        vm = self.resources[key]
        fronts = self._public_front(vm)

        def admits(peer: str) -> bool:
            with self.lock:
                current = self.resources.get(key)
                if current is None or current["properties"].get("provisioningState") != (
                    "Succeeded"
                ):
                    return False
                for address, cfg, nic in self._public_front(current):
                    if address == fronts[0][0]:
                        return self._nsgs_admit(cfg, nic, peer)
                return False

        self.guests.boot(
            key,
            logins=_azure_logins(vm),
            admits=admits if fronts else (lambda peer: False),
            address=fronts[0][0] if fronts else None,
        )

    def _nsgs_admit(self, cfg: dict[str, Any], nic: dict[str, Any], peer: str) -> bool:
        """Inbound, "the subnet's NSG is evaluated first, then the network interface's":
        both must allow ("How network security groups filter network traffic", Azure
        Virtual Network docs). With neither, a Standard SKU public IP is "secure by
        default and closed to inbound traffic", a Basic one open ("Public IP addresses",
        SKU)."""
        subnet = self._subnet(str(cfg.get("properties", {}).get("subnet", {}).get("id", "")))
        groups = [
            self._get_ref((subnet or {}).get("properties", {}).get("networkSecurityGroup")),
            self._get_ref(nic.get("properties", {}).get("networkSecurityGroup")),
        ]
        private = str(cfg.get("properties", {}).get("privateIPAddress", ""))
        present = [g for g in groups if g is not None]
        if not present:
            pip = self._get_ref(cfg.get("properties", {}).get("publicIPAddress")) or {}
            return str((pip.get("sku") or {}).get("name", "Basic")).lower() != "standard"
        return all(nsg_admits(g, peer, private) for g in present)

    # -- special paths ---------------------------------------------------------------------
    def _instance_view(self, req: Request) -> Response:
        key = self._key(req.path[: -len("/instanceView")])
        if key not in self.resources:
            return 404, self.not_found(req.path), {}
        self._advance(key)
        res = self.resources[key]
        prov = res["properties"]["provisioningState"]
        self._boot_reads[key] = self._boot_reads.get(key, 0) + 1
        if prov != "Succeeded" or self._never_running:
            power = "PowerState/starting"
        elif self._boot_reads[key] >= self.boot_polls:
            power = "PowerState/running"
        else:
            power = "PowerState/starting"
        statuses = [
            {"code": f"ProvisioningState/{prov.lower()}", "level": "Info"},
            {"code": power, "level": "Info"},
        ]
        return 200, {"computerName": res["name"], "statuses": statuses}, {}

    def _latest_version(self, definition_id: str) -> str | None:
        """The version ``latest`` of a definition resolves to: the highest version number
        not excluded from latest."""
        prefix = self._key(definition_id) + "/versions/"
        names = [
            r["name"]
            for k, r in self.resources.items()
            if k.startswith(prefix)
            and "/" not in k[len(prefix) :]
            and not r["properties"].get("publishingProfile", {}).get("excludeFromLatest")
        ]
        return max(names, key=lambda v: tuple(int(x) for x in v.split("."))) if names else None

    def _list_all_vms(self, req: Request) -> Response:
        items = [
            copy.deepcopy(r)
            for r in self.resources.values()
            if r["type"].lower() == "microsoft.compute/virtualmachines"
        ]
        return self._page(req, items)

    def set_gallery_permissions(self, rg: str, gallery: str, permissions: str = "Groups") -> None:
        """The gallery's ``sharingProfile.permissions`` (``Private`` when unset), fixed when
        the gallery is created: "During the preview, you need to create a new gallery,
        with the property sharingProfile.permissions set to Groups" (Microsoft Learn,
        share-gallery-direct)."""
        rid = self.rid(rg, f"Microsoft.Compute/galleries/{gallery}")
        with self.lock:
            body = self.resources[self._key(rid)]
            body["properties"]["sharingProfile"] = {"permissions": permissions}

    def _share(self, req: Request) -> Response:
        """Galleries - Share (gallery sharing profile update): a direct shared gallery
        needs ``sharingProfile.permissions`` ``Groups``; any other gallery is refused (the
        fake's code and words: the documents name the rule, not ARM's answer)."""
        key = self._key(req.path[: -len("/share")])
        if key not in self.resources:
            return 404, self.not_found(req.path), {}
        profile = self.resources[key].get("properties", {}).get("sharingProfile") or {}
        if str(profile.get("permissions", "Private")).lower() != "groups":
            msg = (
                "The gallery's sharingProfile.permissions is not Groups: it cannot be shared "
                "with subscriptions or tenants."
            )
            return 409, arm_error("OperationNotAllowed", msg), {}
        body = req.body or {}
        groups = self.sharing.setdefault(key, [])
        for group in body.get("groups", []):
            current = next((g for g in groups if g["type"] == group["type"]), None)
            if current is None:
                groups.append({"type": group["type"], "ids": list(group.get("ids", []))})
            elif body.get("operationType") == "Remove":
                current["ids"] = [i for i in current["ids"] if i not in group.get("ids", [])]
            else:
                current["ids"] = sorted(set(current["ids"]) | set(group.get("ids", [])))
        op_id = self._start_op(key, lambda: None)
        headers = self._op_headers(op_id)
        return 202, None, {**headers, "Location": headers["Azure-AsyncOperation"]}


def sanitized(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


# -- what a booted VM admits ----------------------------------------------------------
# "Disallowed values" of osProfile.adminUsername (Compute REST API reference,
# Virtual Machines - Create Or Update, OSProfile.adminUsername).
DISALLOWED_ADMINS = frozenset(
    ["administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1",
     "1", "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david",
     "guest", "john", "owner", "root", "server", "sql", "support", "support_388945a0",
     "sys", "test2", "test3", "user4", "user5"]
)  # fmt: skip


def _os_profile_refusal(body: dict[str, Any]) -> Response | None:
    """ARM's own checks of a Linux ``osProfile``: an allowed ``adminUsername`` (at most 64
    characters, none of ``DISALLOWED_ADMINS``), and each SSH key's ``path`` exactly
    ``/home/<adminUsername>/.ssh/authorized_keys``: "Destination path for SSH public
    keys is currently limited to its default value /home/<user>/.ssh/authorized_keys
    due to a known issue in Linux provisioning agent" (ARM's InvalidParameter, target
    linuxConfiguration.ssh.publicKeys.path)."""
    profile = body.get("properties", {}).get("osProfile")
    if not profile:
        return None
    admin = str(profile.get("adminUsername", ""))
    if not admin or len(admin) > 64 or admin.lower() in DISALLOWED_ADMINS:
        error = arm_error("InvalidParameter", "The Admin Username specified is not allowed.")
        error["error"]["target"] = "adminUsername"
        return 400, error, {}
    linux = profile.get("linuxConfiguration") or {}
    for key in (linux.get("ssh") or {}).get("publicKeys") or []:
        expected = f"/home/{admin}/.ssh/authorized_keys"
        if key.get("path", expected) != expected:
            error = arm_error(
                "InvalidParameter",
                f"Destination path for SSH public keys is currently limited to its default "
                f"value {expected} due to a known issue in Linux provisioning agent.",
            )
            error["error"]["target"] = "linuxConfiguration.ssh.publicKeys.path"
            return 400, error, {}
    return None


def _azure_logins(vm: dict[str, Any]) -> list[tuple[str, str]]:
    """The Linux provisioning agent (walinuxagent / cloud-init on Azure) creates
    ``osProfile.adminUsername`` and installs each ``linuxConfiguration.ssh.publicKeys``
    ``keyData`` for it ("OSProfile", "SshPublicKey": "SSH public key certificate used to
    authenticate with the VM through ssh"); nobody else gets a login."""
    profile = vm.get("properties", {}).get("osProfile") or {}
    admin = str(profile.get("adminUsername", ""))
    keys = ((profile.get("linuxConfiguration") or {}).get("ssh") or {}).get("publicKeys") or []
    return [(admin, str(k.get("keyData", ""))) for k in keys if admin and k.get("keyData")]


def _listed(props: dict[str, Any], one: str, many: str) -> list[str]:
    values = list(props.get(many) or [])
    if props.get(one):
        values.append(props[one])
    return [str(v) for v in values]


def nsg_admits(nsg: dict[str, Any], peer: str, private_ip: str) -> bool:
    """Does this NSG allow TCP 22 from ``peer`` (the Internet) to ``private_ip``?

    Rules are "processed in priority order, with lower numbers processed before higher
    numbers [...] Once traffic matches a rule, processing stops" (Azure Virtual Network
    docs, "Network security groups", Security rules). An inbound rule matches on
    protocol (``Tcp`` or ``*``), ``sourceAddressPrefix(es)`` (``*``, ``Internet`` or a
    CIDR holding the peer; the ``VirtualNetwork`` and ``AzureLoadBalancer`` tags never
    hold an outside address), ``destinationAddressPrefix(es)`` and
    ``destinationPortRange(s)``. The default rules after them admit only the virtual
    network and the load balancer, then ``DenyAllInBound``: an outside peer no custom
    rule allows is denied."""
    rules = sorted(
        (r.get("properties", {}) for r in nsg.get("properties", {}).get("securityRules", [])),
        key=lambda r: int(r.get("priority", 4096)),
    )
    for rule in rules:
        if str(rule.get("direction", "")).lower() != "inbound":
            continue
        if str(rule.get("protocol", "")).lower() not in ("tcp", "*"):
            continue
        sources = _listed(rule, "sourceAddressPrefix", "sourceAddressPrefixes")
        if not any(cidr_admits(s, peer) for s in sources):
            continue
        targets = _listed(rule, "destinationAddressPrefix", "destinationAddressPrefixes")
        if not any(
            t.lower() in ("*", "virtualnetwork") or cidr_admits(t, private_ip) for t in targets
        ):
            continue
        ports = _listed(rule, "destinationPortRange", "destinationPortRanges")
        if not any(port_in(p) for p in ports):
            continue
        return str(rule.get("access", "")).lower() == "allow"
    return False
