"""Each cloud fake refuses a call its caller's permissions do not cover, as the cloud does.

The permission documents under ``images/permissions/`` are what a team creates in its
accounts; the emulators hold a run to exactly one of them:

- **Google Cloud** (``enforce_gcp``): every Compute request is mapped to the IAM
  permissions its method requires (``GCP_RULES``: method, path, permissions, and the
  extra permissions a request body asks for, each with the Compute API reference page
  that lists them). A missing one answers as Compute does: ``403`` ``forbidden``,
  "Required 'compute.images.create' permission for 'projects/P/global/images/N'".
- **Azure** (``enforce_arm``): ARM authorizes the operation named by the request itself,
  ``{namespace}/{type}[/{child type}...]/{read|write|delete|action}`` ("Azure resource
  provider operations"; "Understand Azure role definitions", Actions format), then the
  linked access checks of the resources a PUT body refers to (``join/action`` of a
  subnet, public IP, NSG or NIC; ``read`` of a gallery image version): "Linked access
  checks" in the ARM documentation. Refusals are ARM's ``403 AuthorizationFailed`` /
  ``LinkedAuthorizationFailed`` bodies naming the action. Role definitions' ``Actions``
  may use ``*`` and are matched without regard to case, minus ``NotActions``.
- **AWS**: moto enforces IAM itself (``aws_policy_user``): the policy is attached to a
  fresh IAM user whose keys the run uses, and ``moto.core.authorization``'s request
  counter turns enforcement on. moto evaluates ``Action`` / ``NotAction`` only (its
  ``access_control`` module: "TODO add support for the Resource and Condition parts"),
  so ``moto_policy`` widens each statement's ``Resource`` to ``*`` and drops its
  ``Condition`` for the emulator; the shipped document keeps them.

Every enforcer records the permissions it granted (``used``) and refused (``refused``), so
a test can also hold a document to least privilege: nothing in it went unused.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.server import FakeServer, Request, Response

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ROOT / "images" / "permissions"


# -- the documents ---------------------------------------------------------------------------
def document_path(cloud: str, role: str) -> Path:
    suffix = {"aws": "json", "gcp": "yaml", "azure": "json"}[cloud]
    return DOCUMENTS / cloud / f"{role}.{suffix}"


def load_document(cloud: str, role: str) -> Any:
    from ruamel.yaml import YAML

    path = document_path(cloud, role)
    return (
        YAML(typ="safe").load(path.read_text()) if cloud == "gcp" else json.loads(path.read_text())
    )


def granted(cloud: str, doc: Any) -> list[str]:
    """The permissions (AWS actions, GCP permissions, Azure actions) a document grants."""
    if cloud == "gcp":
        return list(doc["includedPermissions"])
    if cloud == "azure":
        return list(doc["Actions"]) + list(doc.get("DataActions", []))
    actions: list[str] = []
    for st in doc["Statement"]:
        if st["Effect"] == "Allow":
            value = st["Action"]
            actions += [value] if isinstance(value, str) else list(value)
    return actions


def without(cloud: str, doc: Any, permission: str) -> Any:
    """A copy of ``doc`` with ``permission`` removed."""
    doc = json.loads(json.dumps(doc))
    if cloud == "gcp":
        doc["includedPermissions"].remove(permission)
    elif cloud == "azure":
        key = "Actions" if permission in doc["Actions"] else "DataActions"
        doc[key].remove(permission)
    else:
        for st in doc["Statement"]:
            value = st["Action"]
            value = [value] if isinstance(value, str) else value
            if permission in value:
                st["Action"] = [a for a in value if a != permission]
        doc["Statement"] = [st for st in doc["Statement"] if st["Action"]]
    return doc


# -- recording -------------------------------------------------------------------------------
@dataclass
class Enforcer:
    """Which permissions a caller holds, and what it was granted and refused."""

    permissions: set[str]
    not_permissions: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)  # permissions needed and granted
    matched: set[str] = field(default_factory=set)  # the document's entries that granted
    refused: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def allows(self, needed: str) -> bool:
        def match(patterns: Iterable[str]) -> str | None:
            return next((p for p in patterns if fnmatch.fnmatch(needed.lower(), p.lower())), None)

        hit = match(self.permissions)
        if hit is None or match(self.not_permissions) is not None:
            self.refused.append(needed)
            return False
        self.used.add(needed)
        self.matched.add(hit)
        return True


# -- Google Cloud ----------------------------------------------------------------------------
GCP_BASE = "/compute/v1/projects/(?P<project>[^/]+)"
REF = "https://cloud.google.com/compute/docs/reference/rest/v1/"
CREATE_VM = "https://cloud.google.com/compute/docs/instances/create-start-instance#permissions"
FIREWALL = "https://cloud.google.com/firewall/docs/firewalls#firewall_rules_permissions"


@dataclass(frozen=True)
class GcpRule:
    method: str
    path: str  # after /compute/v1/projects/P
    permissions: tuple[str, ...]
    source: str
    extra: Callable[[Any], tuple[str, ...]] | None = None


def _image_insert_extra(body: Any) -> tuple[str, ...]:
    body = body or {}
    out: list[str] = []
    if body.get("sourceImage"):
        out.append("compute.images.useReadOnly")
    if body.get("sourceDisk"):
        out.append("compute.disks.useReadOnly")
    return tuple(out)


def _instance_insert_extra(body: Any) -> tuple[str, ...]:
    """compute.instances.create needs more for what the instance uses ("Create and start
    a Compute Engine instance", Required roles and permissions)."""
    body = body or {}
    out = ["compute.disks.create"]
    if any(d.get("initializeParams", {}).get("sourceImage") for d in body.get("disks", [])):
        out.append("compute.images.useReadOnly")
    for nic in body.get("networkInterfaces", []):
        out.append("compute.subnetworks.use")
        if nic.get("accessConfigs"):
            out.append("compute.subnetworks.useExternalIp")
    if body.get("metadata", {}).get("items"):
        out.append("compute.instances.setMetadata")
    if body.get("labels"):
        out.append("compute.instances.setLabels")
    if body.get("tags", {}).get("items"):
        out.append("compute.instances.setTags")
    if body.get("serviceAccounts"):
        out.append("compute.instances.setServiceAccount")
    if body.get("resourcePolicies"):  # a compact placement policy (multi-node runs)
        out.append("compute.resourcePolicies.use")
    return tuple(dict.fromkeys(out))


GCP_RULES: tuple[GcpRule, ...] = (
    GcpRule("GET", "/global/operations/[^/]+", ("compute.globalOperations.get",),
            REF + "globalOperations/get"),
    GcpRule("GET", "/zones/[^/]+/operations/[^/]+", ("compute.zoneOperations.get",),
            REF + "zoneOperations/get"),
    GcpRule("GET", "/regions/[^/]+/operations/[^/]+", ("compute.regionOperations.get",),
            REF + "regionOperations/get"),
    GcpRule("GET", "/zones", ("compute.zones.list",), REF + "zones/list"),
    GcpRule("GET", "/regions/[^/]+", ("compute.regions.get",), REF + "regions/get"),
    GcpRule("GET", "/global/images", ("compute.images.list",), REF + "images/list"),
    GcpRule("POST", "/global/images", ("compute.images.create",), REF + "images/insert",
            _image_insert_extra),
    GcpRule("GET", "/global/images/family/[^/]+", ("compute.images.getFromFamily",),
            REF + "images/getFromFamily"),
    GcpRule("GET", "/global/images/[^/]+", ("compute.images.get",), REF + "images/get"),
    GcpRule("DELETE", "/global/images/[^/]+", ("compute.images.delete",),
            REF + "images/delete"),
    GcpRule("PATCH", "/global/images/[^/]+", ("compute.images.update",), REF + "images/patch"),
    GcpRule("POST", "/global/images/[^/]+/deprecate", ("compute.images.deprecate",),
            REF + "images/deprecate"),
    GcpRule("POST", "/global/images/[^/]+/setLabels", ("compute.images.setLabels",),
            REF + "images/setLabels"),
    GcpRule("POST", "/global/images/[^/]+/setIamPolicy", ("compute.images.setIamPolicy",),
            REF + "images/setIamPolicy"),
    GcpRule("GET", "/global/images/[^/]+/getIamPolicy", ("compute.images.getIamPolicy",),
            REF + "images/getIamPolicy"),
    GcpRule("GET", "/aggregated/instances", ("compute.instances.list",),
            REF + "instances/aggregatedList"),
    GcpRule("GET", "/zones/[^/]+/instances", ("compute.instances.list",), REF + "instances/list"),
    GcpRule("POST", "/zones/[^/]+/instances", ("compute.instances.create",),
            CREATE_VM, _instance_insert_extra),
    GcpRule("GET", "/zones/[^/]+/instances/[^/]+", ("compute.instances.get",),
            REF + "instances/get"),
    GcpRule("DELETE", "/zones/[^/]+/instances/[^/]+", ("compute.instances.delete",),
            REF + "instances/delete"),
    GcpRule("GET", "/zones/[^/]+/disks/[^/]+", ("compute.disks.get",), REF + "disks/get"),
    GcpRule("GET", "/zones/[^/]+/reservations/[^/]+", ("compute.reservations.get",),
            REF + "reservations/get"),
    GcpRule("POST", "/regions/[^/]+/resourcePolicies", ("compute.resourcePolicies.create",),
            REF + "resourcePolicies/insert"),
    GcpRule("GET", "/regions/[^/]+/resourcePolicies", ("compute.resourcePolicies.list",),
            REF + "resourcePolicies/list"),
    GcpRule("GET", "/aggregated/resourcePolicies", ("compute.resourcePolicies.list",),
            REF + "resourcePolicies/aggregatedList"),
    GcpRule("GET", "/regions/[^/]+/resourcePolicies/[^/]+", ("compute.resourcePolicies.get",),
            REF + "resourcePolicies/get"),
    GcpRule("DELETE", "/regions/[^/]+/resourcePolicies/[^/]+",
            ("compute.resourcePolicies.delete",), REF + "resourcePolicies/delete"),
    GcpRule("POST", "/global/firewalls", ("compute.firewalls.create",
                                           "compute.networks.updatePolicy"), FIREWALL),
    GcpRule("GET", "/global/firewalls", ("compute.firewalls.list",), REF + "firewalls/list"),
    GcpRule("GET", "/global/firewalls/[^/]+", ("compute.firewalls.get",), REF + "firewalls/get"),
    GcpRule("DELETE", "/global/firewalls/[^/]+", ("compute.firewalls.delete",
                                                   "compute.networks.updatePolicy"), FIREWALL),
)  # fmt: skip
# Asking which permissions one holds needs none ("projects.testIamPermissions": "There
# are no permissions required for making this API call").
GCP_OPEN = re.compile(r"^/v[13]/projects/[^/:]+:testIamPermissions$")


# Resource Manager v1 projects.getEffectiveOrgPolicy: "Authorization requires the
# following IAM permission on the specified resource: orgpolicy.policy.get"
GCP_ORG_POLICY = re.compile(r"^/v1/projects/[^/:]+:getEffectiveOrgPolicy$")


def gcp_needs(method: str, path: str, body: Any) -> tuple[str, ...] | None:
    """The permissions a Compute request needs; None for a request no rule knows."""
    if GCP_OPEN.match(path):
        return ()
    if method == "POST" and GCP_ORG_POLICY.match(path):
        return ("orgpolicy.policy.get",)
    for rule in GCP_RULES:
        if rule.method == method and re.fullmatch(GCP_BASE + rule.path, path):
            return rule.permissions + (rule.extra(body) if rule.extra else ())
    return None


def enforce_gcp(fake: FakeServer, permissions: Iterable[str]) -> Enforcer:
    """From now on ``fake`` answers only what ``permissions`` (a custom role's
    ``includedPermissions``) allow."""
    enforcer = Enforcer(set(permissions))

    def authorize(req: Request) -> Response | None:
        needs = gcp_needs(req.method, req.path, req.body)
        if needs is None:
            enforcer.unknown.append(f"{req.method} {req.path}")
            message = f"no permission known for {req.method} {req.path} (tests/fakes/permissions)"
            return 500, {"error": {"code": 500, "message": message}}, {}
        for permission in needs:
            if not enforcer.allows(permission):
                target = req.path.split("/compute/v1/", 1)[-1]
                message = f"Required '{permission}' permission for '{target}'"
                body = {"error": {"code": 403, "message": message, "errors": [
                    {"message": message, "domain": "global", "reason": "forbidden"}]}}  # fmt: skip
                return 403, body, {}
        return None

    fake.authorize = authorize
    return enforcer


# -- Azure -----------------------------------------------------------------------------------
# Asking which actions one may perform needs none (Permissions - List For Resource Group).
ARM_OPEN = re.compile(r"/providers/microsoft\.authorization/permissions$", re.I)
# Linked access checks: a PUT naming another resource needs this action on it.
LINKED = {
    "microsoft.network/virtualnetworks/subnets": "join/action",
    "microsoft.network/publicipaddresses": "join/action",
    "microsoft.network/networksecuritygroups": "join/action",
    "microsoft.network/networkinterfaces": "join/action",
    "microsoft.compute/capacityreservationgroups": "deploy/action",
    "microsoft.compute/galleries/images/versions": "read",
    "microsoft.compute/galleries/images": "read",
}


def arm_operation(method: str, path: str) -> str:
    """The RBAC operation ARM authorizes for a request (``Provider/type/.../verb``)."""
    parts = [p for p in path.split("/") if p]
    if "providers" not in parts:  # /subscriptions/S[/resourceGroups/RG]
        kinds = ["Microsoft.Resources", "subscriptions"]
        if len(parts) >= 3:
            kinds.append("resourceGroups")
        rest: list[str] = []
    else:
        i = len(parts) - 1 - parts[::-1].index("providers")
        kinds = [parts[i + 1]]
        rest = parts[i + 2 :]
        kinds += rest[0::2]
    action = None
    if rest and len(rest) % 2 == 0 and method == "POST":
        action = kinds.pop()  # .../share: the action of the resource
    if action:
        return "/".join([*kinds, action, "action"])
    verb = {"GET": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete"}[method]
    return "/".join([*kinds, verb])


def arm_linked(body: Any) -> list[tuple[str, str]]:
    """(action, scope) for every resource a PUT body refers to by id."""
    found: list[tuple[str, str]] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif key == "id" and isinstance(node, str) and "/providers/" in node:
            kind = arm_operation("GET", node).rsplit("/", 1)[0].lower()
            if kind in LINKED:
                found.append((f"{arm_operation('GET', node).rsplit('/', 1)[0]}/{LINKED[kind]}",
                              node))  # fmt: skip

    walk((body or {}).get("properties", {}))
    return found


def enforce_arm(
    fake: FakeServer, actions: Iterable[str], not_actions: Iterable[str] = ()
) -> Enforcer:
    """From now on ``fake`` answers only what a role definition's Actions allow."""
    enforcer = Enforcer(set(actions), set(not_actions))
    client = "imagectl-ci"

    def authorize(req: Request) -> Response | None:
        if ARM_OPEN.search(req.path):
            return None
        needed = arm_operation(req.method, req.path)
        scope = req.path
        if not enforcer.allows(needed):
            message = (
                f"The client '{client}' with object id '{client}' does not have authorization "
                f"to perform action '{needed}' over scope '{scope}' or the scope is invalid. "
                "If access was recently granted, please refresh your credentials."
            )
            return 403, {"error": {"code": "AuthorizationFailed", "message": message}}, {}
        if req.method == "PUT":
            for action, linked in arm_linked(req.body):
                if not enforcer.allows(action):
                    message = (
                        f"The client '{client}' with object id '{client}' has permission to "
                        f"perform action '{needed}' on scope '{scope}'; however, it does not "
                        f"have permission to perform action(s) '{action}' on the linked "
                        f"scope(s) '{linked}' (respectively) or the linked scope(s) are "
                        "invalid."
                    )
                    error = {"code": "LinkedAuthorizationFailed", "message": message}
                    return 403, {"error": error}, {}
        return None

    fake.authorize = authorize
    return enforcer


# -- AWS (moto) ------------------------------------------------------------------------------
def moto_policy(doc: Any) -> dict[str, Any]:
    """The policy as moto can evaluate it: each statement's actions, on every resource."""
    statements = []
    for st in doc["Statement"]:
        statements.append({"Effect": st["Effect"], "Action": st["Action"], "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": statements}


def aws_policy_user(endpoint: str | None, doc: Any, name: str) -> dict[str, str]:
    """An IAM user holding exactly ``doc`` (as moto evaluates it); its credentials."""
    import boto3

    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=endpoint)
    iam.create_user(UserName=name)
    arn = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(moto_policy(doc)))
    # the document as shipped (Resource and Condition kept) is what IAM's policy
    # simulation evaluates (imagectl.clouds.aws.sandbox_doctor); moto's request checks
    # get ``moto_policy``
    from imagectl.clouds.aws.sandbox_doctor import SHIPPED

    SHIPPED[arn["Policy"]["Arn"]] = json.loads(json.dumps(doc))
    iam.attach_user_policy(UserName=name, PolicyArn=arn["Policy"]["Arn"])
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
    }


AWS_DENIED = re.compile(r"not authorized to perform:? (?P<action>[a-z0-9-]+:[A-Za-z0-9]+)")


def aws_refused(text: str) -> list[str]:
    """The actions an AWS AccessDenied message names."""
    return [m["action"] for m in AWS_DENIED.finditer(text)]


def _denial(message: str, action: str) -> str:
    """AWS's words for an implicit deny ("User: ARN is not authorized to perform: ACTION
    on resource: ... because no identity-based policy allows the ACTION action": IAM User
    Guide, "Troubleshoot access denied error messages")."""
    return f"{message} because no identity-based policy allows the {action} action"


def _ec2_denied(message: str) -> Exception:
    """EC2's refusal: HTTP 403 ``UnauthorizedOperation`` in EC2's own error document
    (``<Response><Errors><Error>``; EC2 API reference, "Error codes": "You are not
    authorized to perform this operation"). moto answers IAM's ``<ErrorResponse>``, which
    the Go SDK (Packer) cannot read: it retried RunInstances ten times, then lost the
    message."""
    from xml.sax.saxutils import escape

    from werkzeug.exceptions import HTTPException

    class Ec2Denied(HTTPException):
        code = 403

    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        "<Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this "
        f"operation. {escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    )
    return Ec2Denied(description=body)


def _matches(pattern: str, action: str) -> bool:
    return fnmatch.fnmatch(action.lower(), pattern.lower())


@contextlib.contextmanager
def aws_enforced(
    monkeypatch: Any, endpoint: str | None, doc: Any, name: str = "imagectl-run"
) -> Iterator[Enforcer]:
    """moto enforces ``doc`` on every request signed with the run's keys (put in the
    environment); what it granted and refused is recorded."""
    import boto3
    from moto.core.authorization import enable_iam_authentication
    from moto.core.exceptions import AccessDeniedError, JsonRESTError
    from moto.iam import access_control

    creds = aws_policy_user(endpoint, doc, f"{name}-{uuid.uuid4().hex[:8]}")
    enforcer = Enforcer(set(granted("aws", doc)))
    original = access_control.IAMRequestBase.check_action_permitted

    def check(self: Any, resource: str) -> None:
        action = str(self._action)
        try:
            original(self, resource)
        except AccessDeniedError as exc:
            enforcer.refused.append(action)
            denial = _denial(exc.message, action)
            if "X-Amz-Target" in (self._headers or {}):
                # A JSON-protocol service (KMS, SSM) refuses in JSON, as AWS does: moto
                # answers in query XML, which botocore cannot parse there (the message is lost)
                raise JsonRESTError("AccessDeniedException", denial) from None
            if getattr(self, "_service", "") == "ec2":
                raise _ec2_denied(denial) from None
            raise
        except Exception:
            enforcer.refused.append(action)
            raise
        enforcer.used.add(action)
        enforcer.matched.update(p for p in enforcer.permissions if _matches(p, action))

    for key, value in creds.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    # boto3's default session keeps the credentials it first resolved (a client made
    # before the block, e.g. the test's own seeding): it resolves them again, in and after
    boto3.DEFAULT_SESSION = None
    # restored on leaving (not at the test's end): a later block records on its own
    access_control.IAMRequestBase.check_action_permitted = check  # type: ignore[method-assign]
    try:
        with enable_iam_authentication():
            yield enforcer
    finally:
        access_control.IAMRequestBase.check_action_permitted = original  # type: ignore[method-assign]
        boto3.DEFAULT_SESSION = None


@contextlib.contextmanager
def enforced(
    cloud: str, fake: Any, monkeypatch: Any, doc: Any, endpoint: str | None = None
) -> Iterator[Enforcer]:
    """Every call of the block answered as ``cloud`` answers the holder of ``doc``: moto
    (in process, or the server at ``endpoint``) for AWS, ``fake`` for Google Cloud and Azure."""
    if cloud == "aws":
        with aws_enforced(monkeypatch, endpoint, doc) as enforcer:
            yield enforcer
        return
    if cloud == "gcp":
        enforcer = enforce_gcp(fake, granted("gcp", doc))
    else:
        enforcer = enforce_arm(fake, doc["Actions"], doc.get("NotActions", ()))
    try:
        yield enforcer
    finally:
        fake.authorize = None


def unused(cloud: str, doc: Any, *runs: Enforcer) -> list[str]:
    """The entries of ``doc`` that none of ``runs`` needed (least privilege: none)."""
    return sorted(set(granted(cloud, doc)).difference(*(run.matched for run in runs)))
