"""A local Compute Engine REST API (``compute/v1``) for ``google-cloud-compute`` clients.

Seeding::

    fake = FakeGcpCompute(project="imagectl-test").start()
    fake.add_image("cand-1", labels={"imagectl-stack": "h100-training"}, family=None)
    client_options = {"api_endpoint": fake.endpoint}

Faults (each returns the ``Fault`` rule; ``times=None`` means forever)::

    fake.throttle(2)                          # next 2 requests: 429 rateLimitExceeded
    fake.capacity_error("us-central1-a")      # inserts there end ZONE_RESOURCE_POOL_EXHAUSTED
    fake.quota_error()                        # instance inserts end QUOTA_EXCEEDED
    fake.never_running("us-central1-b")       # instances there stay PROVISIONING
    fake.fail_operation("insert", "QUOTA_EXCEEDED", on="/global/images/")  # ends in error

State is in ``fake.images`` / ``fake.instances`` (``{(zone, name): json}``) /
``fake.firewalls`` / ``fake.operations`` / ``fake.iam`` as the API's own camelCase JSON.
Operations are RUNNING on creation and DONE after ``op_polls`` GETs of the operation
(``op_polls=0``: DONE at once); the effect (image READY, instance RUNNING, deletion)
happens when the operation completes. Instances go PROVISIONING -> STAGING -> RUNNING
over ``boot_polls`` GETs of the instance.

Booting guests: given a ``GuestHost`` (``FakeGcpCompute(guests=host)``), an inserted
instance boots a QEMU guest when its insert operation completes, with Compute Engine's
semantics (``_gcp_logins``, ``firewall_admits``): the users and keys of metadata
``ssh-keys`` and the one NAT IP of an ``accessConfig`` (``127.0.0.N``) reachable as the
network's firewall rules admit; deleting the instance stops it. ``project_metadata``
stands in for the project's common instance metadata (its ``ssh-keys``,
``enable-oslogin``).
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from tests.fakes.guests import GuestHost, cidr_admits, port_in
from tests.fakes.server import FakeServer, Request, Response

BASE = "/compute/v1/projects/(?P<project>[^/]+)"
REPO = Path(__file__).resolve().parents[2]


def _storage_locations() -> frozenset[str]:
    """Where an image may be stored: "Cloud Storage bucket storage location of the image
    (regional or multi-regional)" (Compute API reference, images.storageLocations[]): the
    multi-regions us, eu, asia and the regions, as images/compat/regions.yaml lists them
    (read here as plain data, not through imagectl)."""
    doc = yaml.safe_load((REPO / "images" / "compat" / "regions.yaml").read_text())
    return frozenset(doc["gcp"]["storage_multi_regions"]) | frozenset(doc["gcp"]["zones"])


STORAGE_LOCATIONS = _storage_locations()
PACIFIC = ZoneInfo("America/Los_Angeles")
PAGE_SIZE = 3  # lists page (nextPageToken) at this size unless maxResults asks otherwise


def _now() -> str:
    """Compute's timestamps: RFC 3339 in Pacific time (``-08:00`` or ``-07:00``), as the
    API returns them (e.g. ``"2026-11-23T12:45:47.123-08:00"``)."""
    return dt.datetime.now(PACIFIC).isoformat(timespec="milliseconds")


def _time(raw: str) -> dt.datetime:
    return dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))


def _page(req: Request, items: list[Any], kind: str, key: str = "items") -> Response:
    """One page of a list (``maxResults`` / ``pageToken`` -> ``nextPageToken``)."""
    size = int(req.query.get("maxResults") or PAGE_SIZE)
    start = int(req.query.get("pageToken") or 0)
    body: dict[str, Any] = {"kind": kind, key: items[start : start + size]}
    if start + size < len(items):
        body["nextPageToken"] = str(start + size)
    return 200, body, {}


def error_body(code: int, message: str, reason: str) -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
        }
    }


class FakeGcpCompute(FakeServer):
    def __init__(
        self,
        project: str = "imagectl-test",
        zones: tuple[str, ...] = ("us-central1-a", "us-central1-b", "us-central1-c"),
        *,
        op_polls: int = 1,
        boot_polls: int = 1,
        guests: GuestHost | None = None,
    ) -> None:
        super().__init__()
        self.guests = guests
        self.project_metadata: dict[str, str] = {}
        # constraint -> the project's effective organization policy (Resource Manager v1
        # Policy JSON), e.g. "constraints/compute.requireOsLogin": {"booleanPolicy":
        # {"enforced": True}}; read by the doctor (tests/fakes/doctor_apis.py)
        self.org_policies: dict[str, dict[str, Any]] = {}
        self.project = project
        self.zones = list(zones)
        self.op_polls = op_polls
        self.boot_polls = boot_polls
        self.images: dict[str, dict[str, Any]] = {}
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.firewalls: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.iam: dict[str, dict[str, Any]] = {}
        self._finish: dict[str, Callable[[], dict[str, Any] | None]] = {}
        self._polls: dict[str, int] = {}
        self._instance_polls: dict[tuple[str, str], int] = {}
        self._capacity: dict[str, int | None] = {}
        self._quota: list[int | None] = []
        self._never_running: set[str | None] = set()
        self._ids = itertools.count(1000)
        self._request_ids: dict[str, dict[str, Any]] = {}
        self.disks: dict[tuple[str, str], dict[str, Any]] = {}
        # regional resource policies (compact placement), by (region, name)
        self.resource_policies: dict[tuple[str, str], dict[str, Any]] = {}
        self._op_failures: list[list[Any]] = []
        # bearer token -> principal of a consumer outside the image project: its reads of
        # images are judged by the image's IAM policy (the project's own callers, with
        # any other token, may do everything)
        self.consumers: dict[str, str] = {}
        # (zone, name) -> {"machineType", "count", "inUse"}: specific reservations
        self.reservations: dict[tuple[str, str], dict[str, Any]] = {}
        self._routes_setup()

    # -- seeding --------------------------------------------------------------------------
    def link(self, rest: str) -> str:
        return f"{self.endpoint}/compute/v1/projects/{self.project}/{rest}"

    def add_image(
        self,
        name: str,
        *,
        family: str | None = None,
        labels: dict[str, str] | None = None,
        status: str = "READY",
        storage_locations: list[str] | None = None,
        created: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """An image of ``project`` (default: the fake's own; a public base image lives in
        its publisher's, e.g. ubuntu-os-cloud)."""
        owner = project or self.project
        image = {
            "kind": "compute#image",
            "id": str(next(self._ids)),
            "name": name,
            "status": status,
            "labels": dict(labels or {}),
            "labelFingerprint": self._fingerprint(),
            "storageLocations": list(storage_locations or ["us"]),
            "creationTimestamp": created or _now(),
            "selfLink": self.link(f"global/images/{name}").replace(
                f"/projects/{self.project}/", f"/projects/{owner}/"
            ),
        }
        if family:
            image["family"] = family
        with self.lock:
            self.images[name] = image
        return image

    def _project_of(self, image: dict[str, Any]) -> str:
        return str(image["selfLink"]).split("/projects/", 1)[1].split("/", 1)[0]

    def _fingerprint(self) -> str:
        """A new ``labelFingerprint``: it "changes after every request to modify or update
        labels" (Compute API reference, GlobalSetLabelsRequest.labelFingerprint)."""
        return base64.b64encode(next(self._ids).to_bytes(8, "big")).decode()

    # -- faults ---------------------------------------------------------------------------
    def throttle(self, times: int = 1, *, method: str | None = None, path: str = "") -> Any:
        """The next ``times`` matching requests answer 429 rateLimitExceeded."""
        return self.add_fault(
            lambda r: (429, error_body(429, "Rate Limit Exceeded", "rateLimitExceeded"), {}),
            method=method,
            path=path,
            times=times,
        )

    def capacity_error(self, zone: str, times: int | None = None) -> None:
        self._capacity[zone] = times

    def quota_error(self, times: int | None = None) -> None:
        self._quota.append(times)

    def fail_operation(
        self,
        kind: str,
        code: str = "INTERNAL_ERROR",
        *,
        on: str = "",
        status: int = 500,
        times: int = 1,
    ) -> None:
        """The next ``times`` operations of ``kind`` (``insert``, ``patch``, ``deprecate``,
        ``setLabels``, ``delete``) whose target contains ``on`` end ``DONE`` with an error,
        and their change is not made. As the real API: the call itself answered 200 with
        a RUNNING operation; the failure is only in the finished operation's ``error`` and
        ``httpErrorStatusCode`` (Compute API reference, Operation resource). A failed image
        insert leaves no image behind."""
        self._op_failures.append([kind, on, code, status, times])

    def _failure_for(self, kind: str, target: str) -> tuple[str, int] | None:
        for entry in self._op_failures:
            if entry[0] == kind and entry[1] in target and entry[4] > 0:
                entry[4] -= 1
                return entry[2], entry[3]
        return None

    def add_reservation(self, zone: str, name: str, *, machine_type: str, count: int) -> None:
        """A specific reservation of ``count`` VMs of ``machine_type`` in ``zone``."""
        self.reservations[(zone, name)] = {
            "machineType": machine_type,
            "count": count,
            "inUse": 0,
        }

    def _reservation_refusal(
        self, zone: str, body: dict[str, Any], target: str
    ) -> dict[str, Any] | None:
        """An instance that must consume a specific reservation (ReservationAffinity
        SPECIFIC_RESERVATION, key compute.googleapis.com/reservation-name) gets it only
        if the reservation is in its zone, matches its machine type and has a VM left;
        otherwise its operation fails. The API reference does not list the codes of those
        failures: the fake uses ZONE_RESOURCE_POOL_EXHAUSTED for a full or mismatched
        reservation (the zone cannot serve the request) and RESOURCE_NOT_FOUND for one
        that does not exist, each naming the reservation."""
        affinity = body.get("reservationAffinity") or {}
        if affinity.get("consumeReservationType") != "SPECIFIC_RESERVATION":
            return None
        if affinity.get("key") != "compute.googleapis.com/reservation-name":
            msg = "Invalid value for field 'resource.reservationAffinity.key'"
            return self._failing_op(target, zone, 400, msg, "INVALID_FIELD_VALUE")
        name = (affinity.get("values") or [""])[0].rsplit("/", 1)[-1]
        res = self.reservations.get((zone, name))
        if res is None:
            msg = f"Specified reservation '{name}' does not exist in zone {zone}."
            return self._failing_op(target, zone, 404, msg, "RESOURCE_NOT_FOUND")
        machine = str(body.get("machineType", "")).rsplit("/", 1)[-1]
        if machine != res["machineType"] or res["inUse"] >= res["count"]:
            msg = f"Specified reservation '{name}' does not have available resources."
            return self._failing_op(target, zone, 503, msg, "ZONE_RESOURCE_POOL_EXHAUSTED")
        res["inUse"] += 1
        return None

    def never_running(self, zone: str | None = None) -> None:
        """Instances (in ``zone``, or everywhere) never leave PROVISIONING."""
        self._never_running.add(zone)

    # -- operations -----------------------------------------------------------------------
    def _operation(
        self,
        kind: str,
        target: str,
        finish: Callable[[], dict[str, Any] | None],
        zone: str | None = None,
    ) -> dict[str, Any]:
        name = f"operation-{next(self._ids)}"
        scope = f"zones/{zone}" if zone else "global"
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "operationType": kind,
            "status": "RUNNING",
            "progress": 0,
            "targetLink": target,
            "insertTime": _now(),
            "selfLink": self.link(f"{scope}/operations/{name}"),
        }
        if zone:
            op["zone"] = self.link(f"zones/{zone}")
        failure = self._failure_for(kind, target)
        if failure is not None:
            code, http = failure
            message = f"{kind} of {target.rsplit('/', 2)[-2:][-1]} failed ({code})"

            def failed(target: str = target) -> dict[str, Any]:
                if kind == "insert" and "/global/images/" in target:
                    self.images.pop(target.rsplit("/", 1)[-1], None)
                return self.op_error(http, message, code)

            finish = failed
        self.operations[name] = op
        self._finish[name] = finish
        self._polls[name] = 0
        if self.op_polls <= 0:
            self._complete(name)
        return dict(op)

    def _complete(self, name: str) -> None:
        op = self.operations[name]
        if op["status"] == "DONE":
            return
        error = self._finish.pop(name)()
        op.update(status="DONE", progress=100, endTime=_now())
        if error:
            op.update(error)

    @staticmethod
    def op_error(status: int, message: str, code: str) -> dict[str, Any]:
        return {
            "httpErrorStatusCode": status,
            "httpErrorMessage": message,
            "error": {"errors": [{"code": code, "message": message}]},
        }

    def _get_operation(self, req: Request) -> Response:
        name = req.match["op"]
        op = self.operations.get(name)
        if op is None:
            return 404, error_body(404, f"operation {name} not found", "notFound"), {}
        self._polls[name] += 1
        if self._polls[name] >= self.op_polls:
            self._complete(name)
        return 200, op, {}

    # -- routes ---------------------------------------------------------------------------
    def _routes_setup(self) -> None:
        r = self.route
        r("GET", BASE + "/global/operations/(?P<op>[^/]+)", self._get_operation)
        r("GET", BASE + "/zones/(?P<zone>[^/]+)/operations/(?P<op>[^/]+)", self._get_operation)
        r("GET", BASE + "/zones", self._list_zones)
        r("GET", BASE + "/global/images", self._list_images)
        r("POST", BASE + "/global/images", self._insert_image)
        r("GET", BASE + "/global/images/family/(?P<family>[^/]+)", self._from_family)
        r("GET", BASE + "/global/images/(?P<name>[^/]+)", self._get_image)
        r("DELETE", BASE + "/global/images/(?P<name>[^/]+)", self._delete_image)
        r("PATCH", BASE + "/global/images/(?P<name>[^/]+)", self._patch_image)
        r("POST", BASE + "/global/images/(?P<name>[^/]+)/deprecate", self._deprecate)
        r("POST", BASE + "/global/images/(?P<name>[^/]+)/setLabels", self._set_labels)
        r("POST", BASE + "/global/images/(?P<name>[^/]+)/setIamPolicy", self._set_iam)
        r("GET", BASE + "/global/images/(?P<name>[^/]+)/getIamPolicy", self._get_iam)
        r("GET", BASE + "/aggregated/instances", self._aggregated_instances)
        r("GET", BASE + "/zones/(?P<zone>[^/]+)/instances", self._list_instances)
        r("POST", BASE + "/zones/(?P<zone>[^/]+)/instances", self._insert_instance)
        r("GET", BASE + "/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", self._get_instance)
        r("GET", BASE + "/zones/(?P<zone>[^/]+)/disks/(?P<name>[^/]+)", self._get_disk)
        r("DELETE", BASE + "/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", self._del_inst)
        r("POST", BASE + "/global/firewalls", self._insert_firewall)
        r("GET", BASE + "/global/firewalls", self._list_firewalls)
        r("GET", BASE + "/global/firewalls/(?P<name>[^/]+)", self._get_firewall)
        r("DELETE", BASE + "/global/firewalls/(?P<name>[^/]+)", self._delete_firewall)
        r("GET", BASE + "/regions/(?P<region>[^/]+)/operations/(?P<op>[^/]+)", self._get_operation)
        r("POST", BASE + "/regions/(?P<region>[^/]+)/resourcePolicies", self._insert_policy)
        r("GET", BASE + "/regions/(?P<region>[^/]+)/resourcePolicies", self._list_policies)
        r("GET", BASE + "/aggregated/resourcePolicies", self._aggregated_policies)
        pol = BASE + "/regions/(?P<region>[^/]+)/resourcePolicies/(?P<name>[^/]+)"
        r("GET", pol, self._get_policy)
        r("DELETE", pol, self._delete_policy)

    def not_found(self, path: str) -> Any:
        return error_body(404, f"The resource '{path}' was not found", "notFound")

    def _missing(self, what: str) -> Response:
        return 404, self.not_found(f"projects/{self.project}/{what}"), {}

    # zones
    def _list_zones(self, req: Request) -> Response:
        items = [
            {
                "kind": "compute#zone",
                "name": z,
                "status": "UP",
                "region": self.link(f"regions/{z.rsplit('-', 1)[0]}"),
                "selfLink": self.link(f"zones/{z}"),
            }
            for z in self.zones
        ]
        return 200, {"kind": "compute#zoneList", "items": items}, {}

    # images
    def _list_images(self, req: Request) -> Response:
        items = [dict(i) for i in self.images.values()]
        flt = req.query.get("filter", "")
        for key, value in re.findall(r'labels\.([\w-]+)\s*=\s*"?([\w.-]+)"?', flt):
            items = [i for i in items if i.get("labels", {}).get(key) == value]
        return _page(req, items, "compute#imageList")

    def _get_image(self, req: Request) -> Response:
        image = self.images.get(req.match["name"])
        if image is None:
            return self._missing(f"global/images/{req.match['name']}")
        self._advance_target(image["selfLink"])
        return 200, image, {}

    def _advance_target(self, link: str) -> None:
        """Reading a resource also moves its pending operation on (nobody else may poll)."""
        for name, op in list(self.operations.items()):
            if op["targetLink"] == link and op["status"] == "RUNNING":
                self._polls[name] += 1
                if self._polls[name] >= self.op_polls:
                    self._complete(name)

    def _insert_image(self, req: Request) -> Response:
        body = dict(req.body or {})
        name = body.get("name", "")
        request_id = req.query.get("requestId")
        if request_id and request_id in self._request_ids:  # the same request, once
            return 200, dict(self._request_ids[request_id]), {}
        if name in self.images:
            msg = f"The resource 'projects/{self.project}/global/images/{name}' already exists"
            return 409, error_body(409, msg, "alreadyExists"), {}
        bad = [loc for loc in body.get("storageLocations") or [] if loc not in STORAGE_LOCATIONS]
        if bad:
            i = list(body["storageLocations"]).index(bad[0])
            msg = (
                f"Invalid value for field 'resource.storageLocations[{i}]': '{bad[0]}'. "
                "Storage location must be a valid Cloud Storage region or multi-region."
            )
            return 400, error_body(400, msg, "invalid"), {}
        source = body.get("sourceImage", "")
        if source and source.rsplit("/", 1)[-1] not in self.images:
            return self._missing(f"global/images/{source.rsplit('/', 1)[-1]}")
        image = self.add_image(
            name,
            family=body.get("family"),
            labels=body.get("labels"),
            status="PENDING",
            storage_locations=body.get("storageLocations"),
        )
        if source:
            image["sourceImage"] = source

        def finish() -> None:
            image["status"] = "READY"

        op = self._operation("insert", image["selfLink"], finish)
        if request_id:
            self._request_ids[request_id] = op
        return 200, op, {}

    def _active(self, image: dict[str, Any]) -> bool:
        state = image.get("deprecated", {}).get("state", "ACTIVE")
        return image.get("status") == "READY" and state in ("", "ACTIVE")

    def add_consumer(self, token: str, principal: str) -> None:
        """Requests with ``Authorization: Bearer <token>`` come from ``principal`` (e.g.
        ``user:dev@other.example``), a caller from another project."""
        self.consumers[token] = principal

    def _forbidden(self, req: Request, image: dict[str, Any]) -> Response | None:
        """A consumer may read an image only with ``roles/compute.imageUser`` on it (or
        ``allAuthenticatedUsers`` there): the role holds compute.images.get,
        .getFromFamily and .useReadOnly ("Manage access to custom images", Compute
        Engine docs). Without it the API answers 403 naming the missing permission."""
        auth = {k.lower(): v for k, v in req.headers.items()}.get("authorization", "")
        principal = self.consumers.get(auth.removeprefix("Bearer ").strip())
        if principal is None:
            return None
        policy = self.iam.get(image["name"], {})
        for binding in policy.get("bindings", []):
            members = binding.get("members", [])
            if binding.get("role") == "roles/compute.imageUser" and (
                principal in members or "allAuthenticatedUsers" in members
            ):
                return None
        msg = (
            f"Required 'compute.images.getFromFamily' permission for "
            f"'projects/{self.project}/global/images/{image['name']}'"
        )
        return 403, error_body(403, msg, "forbidden"), {}

    def _from_family(self, req: Request) -> Response:
        family = req.match["family"]
        project = req.match["project"]  # a family is one project's ("Image families")
        members = [
            i
            for i in self.images.values()
            if i.get("family") == family and self._active(i) and self._project_of(i) == project
        ]
        if not members:
            return 404, self.not_found(f"projects/{project}/global/images/family/{family}"), {}
        image = max(members, key=lambda i: (_time(i["creationTimestamp"]), int(i["id"])))
        return self._forbidden(req, image) or (200, image, {})

    def _image_op(
        self, req: Request, kind: str, apply: Callable[[dict[str, Any]], None]
    ) -> Response:
        image = self.images.get(req.match["name"])
        if image is None:
            return self._missing(f"global/images/{req.match['name']}")

        def finish() -> None:
            apply(image)

        return 200, self._operation(kind, image["selfLink"], finish), {}

    def _delete_image(self, req: Request) -> Response:
        return self._image_op(req, "delete", lambda i: self.images.pop(i["name"], None))

    PATCHABLE = frozenset({"family", "description", "deprecated"})

    def _patch_image(self, req: Request) -> Response:
        """images.patch: "Only the following fields can be modified: family, description,
        deprecation status" (Compute API reference); anything else is a 400."""
        body = {k: v for k, v in dict(req.body or {}).items() if v not in (None, "", [], {})}
        other = sorted(set(body) - self.PATCHABLE - {"name"})
        if other:
            msg = f"Invalid value for field(s) {', '.join(other)}: cannot be patched"
            return 400, error_body(400, msg, "invalid"), {}

        def apply(image: dict[str, Any]) -> None:
            image.update({k: v for k, v in body.items() if k in self.PATCHABLE})

        return self._image_op(req, "patch", apply)

    def _deprecate(self, req: Request) -> Response:
        status = dict(req.body or {})

        def apply(image: dict[str, Any]) -> None:
            if status.get("state") in (None, "", "ACTIVE"):
                image.pop("deprecated", None)
            else:
                image["deprecated"] = status

        return self._image_op(req, "deprecate", apply)

    def _set_labels(self, req: Request) -> Response:
        """images.setLabels replaces the label set, guarded by ``labelFingerprint``: "You
        must always provide an up-to-date fingerprint hash in order to update or change
        labels" (Compute API reference, GlobalSetLabelsRequest). A stale or absent one is
        refused with 412 conditionNotMet (the answer googleapis/google-cloud-go#7802
        records); an accepted request changes the fingerprint at once (so a second request
        sent with the same one is stale), its labels when the operation completes (a
        failed operation changes none)."""
        body = dict(req.body or {})
        labels = dict(body.get("labels") or {})
        image = self.images.get(req.match["name"])
        if image is None:
            return self._missing(f"global/images/{req.match['name']}")
        if body.get("labelFingerprint") != image["labelFingerprint"]:
            msg = "Labels fingerprint either invalid or resource labels have changed"
            refusal = error_body(412, msg, "conditionNotMet")
            refusal["error"]["errors"][0].update(location="If-Match", locationType="header")
            return 412, refusal, {}
        image["labelFingerprint"] = self._fingerprint()

        def apply(image: dict[str, Any]) -> None:
            image["labels"] = labels

        return self._image_op(req, "setLabels", apply)

    def _set_iam(self, req: Request) -> Response:
        policy = dict((req.body or {}).get("policy") or {})
        policy.setdefault("etag", "BwY=")
        self.iam[req.match["name"]] = policy
        return 200, policy, {}

    def _get_iam(self, req: Request) -> Response:
        return 200, self.iam.get(req.match["name"], {"etag": "ACAB"}), {}

    # instances
    def _instance_view(self, zone: str, name: str) -> dict[str, Any]:
        inst = self.instances[(zone, name)]
        if inst["status"] in ("PROVISIONING", "STAGING") and not (
            {zone, None} & self._never_running
        ):
            self._instance_polls[(zone, name)] += 1
            if self._instance_polls[(zone, name)] >= self.boot_polls:
                inst["status"] = "RUNNING"
            else:
                inst["status"] = "STAGING"
        return inst

    def _get_instance(self, req: Request) -> Response:
        key = (req.match["zone"], req.match["name"])
        if key not in self.instances:
            return self._missing(f"zones/{key[0]}/instances/{key[1]}")
        return 200, self._instance_view(*key), {}

    def _get_disk(self, req: Request) -> Response:
        key = (req.match["zone"], req.match["name"])
        disk = self.disks.get(key)
        return (200, disk, {}) if disk else self._missing(f"zones/{key[0]}/disks/{key[1]}")

    def _list_instances(self, req: Request) -> Response:
        zone = req.match["zone"]
        items = [self._instance_view(z, n) for (z, n) in list(self.instances) if z == zone]
        return _page(req, items, "compute#instanceList")

    def _aggregated_instances(self, req: Request) -> Response:
        items: dict[str, Any] = {}
        for z, n in list(self.instances):
            items.setdefault(f"zones/{z}", {"instances": []})["instances"].append(
                self._instance_view(z, n)
            )
        return 200, {"kind": "compute#instanceAggregatedList", "items": items}, {}

    def _requires_os_login(self) -> bool:
        policy = self.org_policies.get("constraints/compute.requireOsLogin") or {}
        return bool((policy.get("booleanPolicy") or {}).get("enforced"))

    def _insert_instance(self, req: Request) -> Response:
        zone = req.match["zone"]
        body = dict(req.body or {})
        name = body.get("name", "")
        if zone not in self.zones:
            return self._missing(f"zones/{zone}")
        if (zone, name) in self.instances:
            return 409, error_body(409, f"instance {name} already exists", "alreadyExists"), {}
        target = self.link(f"zones/{zone}/instances/{name}")
        if zone in self._capacity and self._capacity[zone] != 0:
            left = self._capacity[zone]
            self._capacity[zone] = None if left is None else left - 1
            msg = (
                f"The zone 'projects/{self.project}/zones/{zone}' does not have enough "
                "resources available to fulfill the request. Try a different zone, or try again "
                "later."
            )
            return 200, self._failing_op(target, zone, 503, msg, "ZONE_RESOURCE_POOL_EXHAUSTED"), {}
        if self._quota and self._quota[0] != 0:
            left = self._quota[0]
            self._quota[0] = None if left is None else left - 1
            msg = "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region us-central1."
            return 200, self._failing_op(target, zone, 403, msg, "QUOTA_EXCEEDED"), {}
        refused = self._reservation_refusal(zone, body, target)
        if refused is not None:
            return 200, refused, {}
        bad_policy = self._policy_refusal(zone, name, body)
        if bad_policy is not None:
            return bad_policy
        unsupported = machine_family_refusal(body)
        if unsupported is not None:
            return unsupported
        source = ""
        for disk in body.get("disks", []):
            source = disk.get("initializeParams", {}).get("sourceImage", "") or source
        image_name = source.rsplit("/", 1)[-1]
        if image_name and image_name not in self.images:
            return self._missing(f"global/images/{image_name}")
        nics = body.get("networkInterfaces") or [{}]
        index = len(self.instances) + 2
        for nic in nics:
            nic.setdefault("networkIP", f"10.128.0.{index}")
            for ac in nic.get("accessConfigs", []):
                if self.guests is not None:  # the guest's public address: 127.0.0.N
                    ac["natIP"] = self.guests.reserve_address(f"{zone}/{name}")
                ac.setdefault("natIP", f"203.0.113.{index}")
        # initializeParams is "[Input Only]" (Compute discovery document, AttachedDisk):
        # an instance GET names each disk by ``source``; the image is the disk's.
        disks = []
        for i, disk in enumerate(body.get("disks", [])):
            params = disk.get("initializeParams") or {}
            disk_name = params.get("diskName") or (name if i == 0 else f"{name}-{i}")
            link = self.link(f"zones/{zone}/disks/{disk_name}")
            self.disks[(zone, disk_name)] = {
                "kind": "compute#disk",
                "id": str(next(self._ids)),
                "name": disk_name,
                "zone": self.link(f"zones/{zone}"),
                "sizeGb": str(params.get("diskSizeGb", "10")),
                "sourceImage": params.get("sourceImage", ""),
                "status": "READY",
                "creationTimestamp": _now(),
                "selfLink": link,
            }
            kept = {k: v for k, v in disk.items() if k != "initializeParams"}
            disks.append({**kept, "kind": "compute#attachedDisk", "source": link, "index": i})
        inst = {
            **body,
            "disks": disks,
            "kind": "compute#instance",
            "id": str(next(self._ids)),
            "status": "PROVISIONING",
            "zone": self.link(f"zones/{zone}"),
            "creationTimestamp": _now(),
            "networkInterfaces": nics,
            "selfLink": target,
        }

        def finish() -> None:
            self.instances[(zone, name)] = inst
            self._instance_polls[(zone, name)] = 0
            self._boot(zone, name)

        return 200, self._operation("insert", target, finish, zone), {}

    # compact placement policies (resourcePolicies, REST reference; "About compact
    # placement policies"): regional; groupPlacementPolicy.collocation COLLOCATED or
    # UNSPECIFIED_COLLOCATION, vmCount >= 1 VMs at most; an instance names policies of its
    # own region; a policy a VM uses cannot be deleted
    def _policy_link(self, region: str, name: str) -> str:
        return self.link(f"regions/{region}/resourcePolicies/{name}")

    def _insert_policy(self, req: Request) -> Response:
        region, body = req.match["region"], dict(req.body or {})
        name = str(body.get("name") or "")
        if region not in {z.rsplit("-", 1)[0] for z in self.zones}:
            return self._missing(f"regions/{region}")
        if (region, name) in self.resource_policies:
            return 409, error_body(409, f"resource policy {name} already exists",
                                   "alreadyExists"), {}  # fmt: skip
        group = body.get("groupPlacementPolicy")
        if not isinstance(group, dict):
            return 400, error_body(400, "Invalid value for field 'resource.groupPlacementPolicy'"
                                   ": a placement policy needs it", "invalid"), {}  # fmt: skip
        if group.get("collocation") not in ("COLLOCATED", "UNSPECIFIED_COLLOCATION"):
            return _invalid(
                f"Invalid value for field 'resource.groupPlacementPolicy"
                f".collocation': {group.get('collocation')!r}"
            )
        count = group.get("vmCount")
        if count is not None and int(count) < 1:
            return 400, error_body(400, "Invalid value for field 'resource.groupPlacementPolicy"
                                   f".vmCount': {count}", "invalid"), {}  # fmt: skip
        link = self._policy_link(region, name)
        policy = {**body, "kind": "compute#resourcePolicy", "id": str(next(self._ids)),
                  "region": self.link(f"regions/{region}"), "status": "READY",
                  "creationTimestamp": _now(), "selfLink": link}  # fmt: skip

        def finish() -> None:
            self.resource_policies[(region, name)] = policy

        return 200, self._regional(self._operation("insert", link, finish), region), {}

    def _regional(self, op: dict[str, Any], region: str) -> dict[str, Any]:
        op["region"] = self.link(f"regions/{region}")
        op["selfLink"] = self.link(f"regions/{region}/operations/{op['name']}")
        return op

    def _get_policy(self, req: Request) -> Response:
        key = (req.match["region"], req.match["name"])
        policy = self.resource_policies.get(key)
        if policy is None:
            return self._missing(f"regions/{key[0]}/resourcePolicies/{key[1]}")
        return 200, policy, {}

    def _list_policies(self, req: Request) -> Response:
        """resourcePolicies.list: one region's policies, paged."""
        region = req.match["region"]
        items = [p for (r, _n), p in self.resource_policies.items() if r == region]
        return _page(req, items, "compute#resourcePolicyList")

    def _aggregated_policies(self, req: Request) -> Response:
        """resourcePolicies.aggregatedList: every region's policies, paged across regions
        (``maxResults`` / ``pageToken``) as Compute pages an aggregated list; ``items``
        maps ``regions/R`` to ``{"resourcePolicies": [...]}``, and a region of the
        project without any on this page to a ``warning`` of code
        ``NO_RESULTS_ON_PAGE`` (Compute API reference, resourcePolicies.aggregatedList)."""
        size = int(req.query.get("maxResults") or PAGE_SIZE)
        start = int(req.query.get("pageToken") or 0)
        every = sorted(self.resource_policies.items())
        items: dict[str, Any] = {}
        for (region, _name), policy in every[start : start + size]:
            items.setdefault(f"regions/{region}", {"resourcePolicies": []})[
                "resourcePolicies"].append(policy)  # fmt: skip
        for region in sorted({z.rsplit("-", 1)[0] for z in self.zones}):
            items.setdefault(f"regions/{region}", {"warning": {
                "code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope "
                f"'regions/{region}' on this page.",
                "data": [{"key": "scope", "value": f"regions/{region}"}]}})  # fmt: skip
        body: dict[str, Any] = {"kind": "compute#resourcePolicyAggregatedList", "items": items}
        if start + size < len(every):
            body["nextPageToken"] = str(start + size)
        return 200, body, {}

    def _users_of(self, link: str) -> list[str]:
        return [n for (_z, n), inst in self.instances.items()
                if any(link.endswith(p.split("/projects/", 1)[-1].lstrip("/"))
                       for p in inst.get("resourcePolicies") or [])]  # fmt: skip

    def _delete_policy(self, req: Request) -> Response:
        key = (req.match["region"], req.match["name"])
        policy = self.resource_policies.get(key)
        if policy is None:
            return self._missing(f"regions/{key[0]}/resourcePolicies/{key[1]}")
        users = self._users_of(policy["selfLink"])
        if users:
            return 400, error_body(400, f"The resource_policy resource '{policy['selfLink']}' "
                                   f"is already being used by '{users[0]}'",
                                   "resourceInUseByAnotherResource"), {}  # fmt: skip

        def finish() -> None:
            self.resource_policies.pop(key, None)

        op = self._operation("delete", policy["selfLink"], finish)
        return 200, self._regional(op, key[0]), {}

    def _policy_refusal(self, zone: str, name: str, body: dict[str, Any]) -> Response | None:
        region = zone.rsplit("-", 1)[0]
        for url in body.get("resourcePolicies") or []:
            match = re.search(r"regions/([^/]+)/resourcePolicies/([^/]+)$", str(url))
            if not match or (match.group(1), match.group(2)) not in self.resource_policies:
                return self._missing(f"resourcePolicies {url}")
            if match.group(1) != region:
                return 400, error_body(400, f"Resource policy {url} is in region "
                                       f"{match.group(1)}, not the instance's {region}",
                                       "invalid"), {}  # fmt: skip
            group = self.resource_policies[(match.group(1), match.group(2))].get(
                "groupPlacementPolicy") or {}  # fmt: skip
            users = self._users_of(self._policy_link(match.group(1), match.group(2)))
            if group.get("vmCount") and len(users) >= int(group["vmCount"]):
                return _invalid(f"Resource policy {url} holds {group['vmCount']} VMs: it is full")
        return None

    # booting guests
    def _boot(self, zone: str, name: str) -> None:
        if self.guests is None:
            return
        inst = self.instances[(zone, name)]
        nat = [
            ac.get("natIP")
            for nic in inst.get("networkInterfaces", [])[:1]
            for ac in nic.get("accessConfigs", [])
            if ac.get("natIP")
        ]

        def admits(peer: str) -> bool:
            with self.lock:
                current = self.instances.get((zone, name))
                if current is None or current["status"] in ("STOPPING", "TERMINATED"):
                    return False
                return firewall_admits(list(self.firewalls.values()), current, peer)

        self.guests.boot(
            f"{zone}/{name}",
            logins=_gcp_logins(
                inst.get("metadata") or {},
                self.project_metadata,
                require_os_login=self._requires_os_login(),
            ),
            admits=admits if nat else (lambda peer: False),
            address=nat[0] if nat else None,
            # the VPC: the instance's networkIP on the host's network between guests
            private_address=(inst.get("networkInterfaces") or [{}])[0].get("networkIP"),
        )

    def _failing_op(self, target: str, zone: str, status: int, msg: str, code: str) -> Any:
        def finish() -> dict[str, Any]:
            return self.op_error(status, msg, code)

        return self._operation("insert", target, finish, zone)

    def _del_inst(self, req: Request) -> Response:
        key = (req.match["zone"], req.match["name"])
        if key not in self.instances:
            return self._missing(f"zones/{key[0]}/instances/{key[1]}")
        self.instances[key]["status"] = "STOPPING"

        def finish() -> None:
            inst = self.instances.pop(key, None) or {}
            if self.guests is not None:
                self.guests.stop(f"{key[0]}/{key[1]}")
            for disk in inst.get("disks", []):
                if disk.get("autoDelete"):
                    self.disks.pop((key[0], disk["source"].rsplit("/", 1)[-1]), None)

        return 200, self._operation("delete", self.instances[key]["selfLink"], finish, key[0]), {}

    # firewalls
    def _insert_firewall(self, req: Request) -> Response:
        body = dict(req.body or {})
        name = body.get("name", "")
        if name in self.firewalls:
            return 409, error_body(409, f"firewall {name} already exists", "alreadyExists"), {}
        body.update(
            kind="compute#firewall",
            id=str(next(self._ids)),
            selfLink=self.link(f"global/firewalls/{name}"),
        )

        def finish() -> None:
            self.firewalls[name] = body

        return 200, self._operation("insert", body["selfLink"], finish), {}

    def _list_firewalls(self, req: Request) -> Response:
        return _page(req, list(self.firewalls.values()), "compute#firewallList")

    def _get_firewall(self, req: Request) -> Response:
        fw = self.firewalls.get(req.match["name"])
        return (200, fw, {}) if fw else self._missing(f"global/firewalls/{req.match['name']}")

    def _delete_firewall(self, req: Request) -> Response:
        name = req.match["name"]
        if name not in self.firewalls:
            return self._missing(f"global/firewalls/{name}")

        def finish() -> None:
            self.firewalls.pop(name, None)

        return 200, self._operation("delete", self.link(f"global/firewalls/{name}"), finish), {}


# -- what a booted instance admits ------------------------------------------------------
TRUE = frozenset({"true", "1", "yes", "y", "on"})


def _metadata(items: dict[str, Any]) -> dict[str, str]:
    return {str(i.get("key")): str(i.get("value", "")) for i in items.get("items") or []}


def _invalid(message: str) -> Response:
    return 400, error_body(400, message, "invalid"), {}


def _gcp_logins(
    metadata: dict[str, Any], project: dict[str, str], *, require_os_login: bool = False
) -> list[tuple[str, str]]:
    """The users and keys the guest environment creates from metadata ``ssh-keys``.

    "Manage SSH keys in metadata" / "Add SSH keys to VMs" (Compute Engine docs): each
    line of the ``ssh-keys`` value is ``USERNAME:KEY_VALUE`` (an expiring key ends in
    ``google-ssh {"userName":...,"expireOn":...}``); the guest environment creates
    USERNAME, with sudo, and authorizes the key. Instance-level keys apply, and the
    project's ``ssh-keys`` too unless the instance sets ``block-project-ssh-keys`` to
    TRUE. With OS Login enabled (``enable-oslogin``, the instance's value overriding the
    project's) "VMs ignore metadata-based SSH keys" ("About OS Login"): no user at all
    here, OS Login is not emulated. SSH as root is disabled "even if you specify an SSH
    key in project or instance metadata for root"."""
    own = _metadata(metadata)
    oslogin = own.get("enable-oslogin", project.get("enable-oslogin", ""))
    # the organization policy constraints/compute.requireOsLogin enables OS Login whatever
    # the metadata says ("About OS Login": "enabled ... by the organization policy")
    if require_os_login or oslogin.strip().lower() in TRUE:
        return []
    values = [own.get("ssh-keys", "")]
    if own.get("block-project-ssh-keys", "").strip().lower() not in TRUE:
        values.append(project.get("ssh-keys", ""))
    logins = []
    now = dt.datetime.now(dt.timezone.utc)
    for line in "\n".join(values).splitlines():
        user, sep, key = line.strip().partition(":")
        if not sep or not user or user == "root" or not key.strip():
            continue
        if " google-ssh " in key:
            key, _, extra = key.partition(" google-ssh ")
            try:
                expire = json.loads(extra).get("expireOn", "")
                if expire and _time(expire) <= now:
                    continue
            except (ValueError, TypeError, AttributeError):
                continue
        logins.append((user, key.strip()))
    return logins


def _network(link: str) -> str:
    return "networks/" + (link or "global/networks/default").rstrip("/").rsplit("/", 1)[-1]


def firewall_admits(firewalls: list[dict[str, Any]], inst: dict[str, Any], peer: str) -> bool:
    """Is TCP 22 from ``peer`` to ``inst`` allowed by the VPC firewall rules?

    "VPC firewall rules" (Cloud NGFW docs): an enabled ``INGRESS`` rule of the
    instance's network applies to the instances whose network tags include one of its
    ``targetTags`` (to every instance of the network when it has no target); it matches
    a connection whose source is in its ``sourceRanges`` (``sourceTags`` name instances
    of the network, never an outside address) and whose protocol and port one of its
    ``allowed`` / ``denied`` entries lists (no ``ports``: every port). Of the matching
    rules the lowest ``priority`` number wins (default 1000) and a deny wins a tie; with
    none, the implied rule denies all ingress."""
    nic = (inst.get("networkInterfaces") or [{}])[0]
    tags = set((inst.get("tags") or {}).get("items") or [])
    accounts = {a.get("email") for a in inst.get("serviceAccounts") or []}
    matched: list[tuple[int, bool]] = []
    for fw in firewalls:
        if fw.get("disabled") or fw.get("direction", "INGRESS") != "INGRESS":
            continue
        if _network(fw.get("network", "")) != _network(nic.get("network", "")):
            continue
        if fw.get("targetTags") and not tags & set(fw["targetTags"]):
            continue
        if fw.get("targetServiceAccounts") and not accounts & set(fw["targetServiceAccounts"]):
            continue
        if not any(cidr_admits(r, peer) for r in fw.get("sourceRanges") or []):
            continue
        deny = bool(fw.get("denied"))
        entries = fw.get("denied") if deny else fw.get("allowed")
        if not any(
            str(e.get("IPProtocol", "")).lower() in ("tcp", "6", "all")
            and (not e.get("ports") or any(port_in(p) for p in e["ports"]))
            for e in entries or []
        ):
            continue
        matched.append((int(fw.get("priority", 1000)), deny))
    if not matched:
        return False
    best = min(p for p, _ in matched)
    return not any(deny for p, deny in matched if p == best)


# What Compute refuses for a GPU machine series, from its documents, independently of the
# launch data imagectl ships (pipeline/clouds/gcp/machine_families.yaml): an instance the
# API defaults would describe (VIRTIO_NET, a pd-standard boot disk, MIGRATE) is refused.
# Sources: Compute Engine docs, "Accelerator-optimized machine family" (A4, A3, A2: "You
# must set the VM host maintenance policy to TERMINATE"; A3 and A4 "use gVNIC"; "Supported
# disk types" per series) and "GPU machine types" / "G2 machine series"; Compute API
# reference, AttachedDiskInitializeParams.diskType ("If not specified, the default is
# pd-standard"), NetworkInterface.nicType, Scheduling.onHostMaintenance ("The default
# behavior is MIGRATE").
FAKE_SERIES: dict[str, dict[str, Any]] = {
    "a4-highgpu": {"gvnic": True, "boot": {"hyperdisk-balanced"}},
    "a3-ultragpu": {"gvnic": True, "boot": {"hyperdisk-balanced"}},
    "a3-megagpu": {"gvnic": True, "boot": {"pd-balanced", "pd-ssd", "hyperdisk-balanced"}},
    "a3-highgpu": {"gvnic": True, "boot": {"pd-balanced", "pd-ssd", "hyperdisk-balanced"}},
    "a3-edgegpu": {"gvnic": True, "boot": {"pd-balanced", "pd-ssd", "hyperdisk-balanced"}},
    "a2-highgpu": {"gvnic": False, "boot": {"pd-standard", "pd-balanced", "pd-ssd"}},
    "a2-megagpu": {"gvnic": False, "boot": {"pd-standard", "pd-balanced", "pd-ssd"}},
    "a2-ultragpu": {"gvnic": False, "boot": {"pd-standard", "pd-balanced", "pd-ssd"}},
    "g2-standard": {"gvnic": True, "boot": {"pd-balanced", "pd-ssd"}},
}


def machine_family_refusal(body: dict[str, Any]) -> Response | None:
    """Compute's 400 for an instance its machine series cannot run as asked."""
    machine = str(body.get("machineType", "")).rsplit("/", 1)[-1]
    series = machine.rsplit("-", 1)[0]
    rules = FAKE_SERIES.get(series)
    if rules is None:
        return None
    field = "resource.scheduling.onHostMaintenance"
    if (body.get("scheduling") or {}).get("onHostMaintenance", "MIGRATE") != "TERMINATE":
        return _invalid(
            f"Invalid value for field '{field}': 'MIGRATE'. Instances with guest "
            f"accelerators do not support live migration ({machine})."
        )
    for i, nic in enumerate(body.get("networkInterfaces") or [{}]):
        nic_type = nic.get("nicType") or "VIRTIO_NET"
        if rules["gvnic"] and nic_type != "GVNIC":
            return _invalid(
                f"Invalid value for field 'resource.networkInterfaces[{i}].nicType': "
                f"'{nic_type}'. Machine type {machine} requires gVNIC (GVNIC)."
            )
    for i, disk in enumerate(body.get("disks") or []):
        if not disk.get("boot"):
            continue
        raw = (disk.get("initializeParams") or {}).get("diskType") or "pd-standard"
        kind = str(raw).rsplit("/", 1)[-1]
        if kind not in rules["boot"]:
            return _invalid(f"Invalid value for field 'resource.disks[{i}].initializeParams."
                            f"diskType': '{raw}'. {kind} disk type cannot be used by "
                            f"{machine} machine type.")  # fmt: skip
    return None
