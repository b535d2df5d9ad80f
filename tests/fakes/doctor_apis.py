"""The read APIs ``imagectl doctor`` asks, added to the Compute and ARM fakes as each
cloud documents them (routes added before the fakes' own):

- Google Cloud: Resource Manager ``projects.testIamPermissions`` (``POST
  /v1/projects/P:testIamPermissions``: the subset of the asked permissions the caller
  holds; no permission needed to ask) and ``projects.getEffectiveOrgPolicy`` (the fake's
  ``org_policies``; ``orgpolicy.policy.get``), Compute ``regions.get`` (``quotas``: metric, limit,
  usage) and ``reservations.get`` (``specificReservation.count`` / ``inUseCount``).
- Azure: ``Permissions - List For Resource Group`` (``actions`` / ``notActions`` /
  ``dataActions``; 404 ``ResourceGroupNotFound`` for a group that does not exist) and
  Compute ``Usage - List`` (``name.value``, ``currentValue``, ``limit``).

What the caller holds comes from the enforcer of ``tests/fakes/permissions.py`` when one
is installed (``fake.authorize``), else everything.
"""

from __future__ import annotations

import fnmatch

from tests.fakes.azure_arm import FakeAzureArm, arm_error
from tests.fakes.gcp_compute import BASE, FakeGcpCompute
from tests.fakes.permissions import Enforcer
from tests.fakes.server import Request, Response


def _holds(enforcer: Enforcer | None, permission: str) -> bool:
    if enforcer is None:
        return True
    low = permission.lower()
    return any(fnmatch.fnmatch(low, p.lower()) for p in enforcer.permissions) and not any(
        fnmatch.fnmatch(low, p.lower()) for p in enforcer.not_permissions
    )


class GcpDoctorApis:
    def __init__(self, fake: FakeGcpCompute, *, region: str) -> None:
        self.fake = fake
        self.enforcer: Enforcer | None = None
        # metric -> (limit, usage)
        self.quotas: dict[str, tuple[float, float]] = {}
        self.region = region
        fake.route("POST", r"/v1/projects/(?P<p>[^/:]+):testIamPermissions", self._test, first=True)
        fake.route("POST", r"/v1/projects/(?P<p>[^/:]+):getEffectiveOrgPolicy", self._org_policy,
                   first=True)  # fmt: skip
        fake.route("GET", BASE + "/regions/(?P<region>[^/]+)", self._region, first=True)
        fake.route(
            "GET",
            BASE + "/zones/(?P<zone>[^/]+)/reservations/(?P<name>[^/]+)",
            self._reservation,
            first=True,
        )

    def _test(self, req: Request) -> Response:
        if req.match["p"] != self.fake.project:
            message = f"The caller does not have permission on project {req.match['p']}"
            return (
                403,
                {"error": {"code": 403, "message": message, "status": "PERMISSION_DENIED"}},
                {},
            )
        asked = list((req.body or {}).get("permissions", []))
        held = [p for p in asked if _holds(self.enforcer, p)]
        return 200, ({"permissions": held} if held else {}), {}

    def _org_policy(self, req: Request) -> Response:
        """Resource Manager v1 ``projects.getEffectiveOrgPolicy``: the merged policy of the
        constraint (``fake.org_policies``); none set answers the constraint alone (its
        default: a boolean constraint not enforced, a list constraint allowing all)."""
        constraint = str((req.body or {}).get("constraint", ""))
        policy = self.fake.org_policies.get(constraint) or {}
        return 200, {"version": 1, "constraint": constraint, **policy}, {}

    def _region(self, req: Request) -> Response:
        name = req.match["region"]
        quotas = (
            [{"metric": m, "limit": lim, "usage": use} for m, (lim, use) in self.quotas.items()]
            if name == self.region
            else []
        )
        return 200, {"kind": "compute#region", "name": name, "status": "UP", "quotas": quotas}, {}

    def _reservation(self, req: Request) -> Response:
        res = self.fake.reservations.get((req.match["zone"], req.match["name"]))
        if res is None:
            return 404, self.fake.not_found(req.path), {}
        body = {
            "kind": "compute#reservation",
            "name": req.match["name"],
            "zone": req.match["zone"],
            "status": "READY",
            "specificReservation": {
                "count": str(res["count"]),
                "inUseCount": str(res["inUse"]),
                "instanceProperties": {"machineType": res["machineType"]},
            },
        }
        return 200, body, {}


class ArmDoctorApis:
    def __init__(self, fake: FakeAzureArm, *, groups: set[str]) -> None:
        self.fake = fake
        self.enforcer: Enforcer | None = None
        self.groups = {g.lower() for g in groups}
        self.usages: dict[str, tuple[int, int]] = {}  # family -> (limit, current)
        sub = "/subscriptions/(?P<sub>[^/]+)"
        fake.route(
            "GET",
            sub + "/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft.Authorization/permissions",
            self._permissions,
            first=True,
        )
        fake.route(
            "GET",
            sub + "/providers/Microsoft.Compute/locations/(?P<loc>[^/]+)/usages",
            self._usages,
            first=True,
        )

    def _permissions(self, req: Request) -> Response:
        rg = req.match["rg"]
        if rg.lower() not in self.groups:
            return (
                404,
                arm_error("ResourceGroupNotFound", f"Resource group '{rg}' could not be found."),
                {},
            )
        if self.enforcer is None:
            actions, nots = ["*"], []
        else:
            actions = sorted(self.enforcer.permissions)
            nots = sorted(self.enforcer.not_permissions)
        return (
            200,
            {
                "value": [
                    {
                        "actions": actions,
                        "notActions": nots,
                        "dataActions": [],
                        "notDataActions": [],
                    }
                ]
            },
            {},
        )

    def _usages(self, req: Request) -> Response:
        value = [
            {
                "unit": "Count",
                "currentValue": cur,
                "limit": lim,
                "name": {"value": fam, "localizedValue": fam},
            }
            for fam, (lim, cur) in self.usages.items()
        ]
        return 200, {"value": value}, {}


__all__ = ["ArmDoctorApis", "GcpDoctorApis"]
