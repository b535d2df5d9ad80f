"""What moto lacks for ``imagectl doctor`` on AWS, added as AWS documents it:

- IAM ``SimulatePrincipalPolicy`` (IAM API reference): for a user or role ARN and a list
  of actions, each action's ``EvalDecision`` (``allowed``, or ``implicitDeny`` when no
  statement of the principal's policies allows it, ``explicitDeny`` when one denies it),
  judged by moto's own policy evaluation (``moto.iam.access_control.IAMPolicy``: actions
  only, as everywhere in moto).
- Service Quotas ``GetServiceQuota`` for EC2's On-Demand quotas (moto knows only
  ``vpc``): the values in ``EC2_QUOTAS`` (quota code -> vCPUs; the account default when a
  test sets nothing), per region.

``install()`` is idempotent.
"""

from __future__ import annotations

import json
from typing import Any

EC2_QUOTAS: dict[str, float] = {}  # quota code -> value (vCPUs), set by tests
DEFAULT_VCPUS = 384.0  # enough for two 192-vCPU instances
NAMES = {
    "L-417A185B": "Running On-Demand P instances",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
}
_installed = False


def _documents(principal: Any) -> list[Any]:
    docs = []
    for policy in list(getattr(principal, "managed_policies", {}).values()):
        version = next(v for v in policy.versions if v.is_default)
        docs.append(
            json.loads(version.document) if isinstance(version.document, str) else version.document
        )
    for raw in getattr(principal, "policies", {}).values():
        docs.append(json.loads(raw) if isinstance(raw, str) else raw)
    return docs


def decide(documents: list[Any], action: str) -> str:
    from moto.iam.access_control import IAMPolicy, PermissionResult

    allowed = False
    for doc in documents:
        result = IAMPolicy(json.dumps(doc)).is_action_permitted(action)
        if result == PermissionResult.DENIED:
            return "explicitDeny"
        allowed = allowed or result == PermissionResult.PERMITTED
    return "allowed" if allowed else "implicitDeny"


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse
    from moto.servicequotas.models import ServiceQuotasBackend

    def simulate_principal_policy(self: Any) -> Any:
        arn = self._get_param("PolicySourceArn")
        actions = self._get_param("ActionNames", [])
        name = arn.rsplit("/", 1)[-1]
        principal = self.backend.get_user(name) if ":user/" in arn else self.backend.get_role(name)
        docs = _documents(principal)
        results = [
            {"EvalActionName": a, "EvalResourceName": "*", "EvalDecision": decide(docs, a)}
            for a in actions
        ]
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy  # type: ignore[attr-defined]
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code != "ec2":
            return original(self, service_code, quota_code)
        return {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": (
                f"arn:aws:servicequotas:{self.region_name}:{self.account_id}:ec2/{quota_code}"
            ),
            "QuotaCode": quota_code,
            "QuotaName": NAMES.get(quota_code, quota_code),
            "Value": EC2_QUOTAS.get(quota_code, DEFAULT_VCPUS),
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }

    ServiceQuotasBackend.get_service_quota = get_service_quota  # type: ignore[method-assign]
