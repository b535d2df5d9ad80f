"""What moto lacks for ``imagectl doctor`` on AWS, added as AWS documents it, for the
docs' sandbox (docs/sandbox.md: ``python -m imagectl.clouds.aws.sandbox``) and the tests
(``tests/fakes/moto_doctor.py``):

- IAM ``SimulatePrincipalPolicy`` (IAM API reference): for a user or role ARN and a list
  of actions, each action's ``EvalDecision`` (``allowed``, ``implicitDeny`` when no
  statement of the principal's policies allows it, ``explicitDeny`` when one denies it),
  with the statements' ``Condition`` elements evaluated against the request's
  ``ContextEntries``: a key the request does not supply fails the condition and is listed
  in ``MissingContextValues``, as IAM does (moto's own evaluation has no conditions).
- EC2 ``GetEbsDefaultKmsKeyId`` (``EBS_DEFAULT_KEYS``; the AWS managed key otherwise).
- Service Quotas ``GetServiceQuota`` for EC2's On-Demand quotas (moto knows only
  ``vpc``): the values in ``EC2_QUOTAS`` (quota code -> vCPUs; the account default when
  nothing is set), per region.
- ``sandbox_identity``: an IAM user holding exactly the shipped documents of some roles,
  its keys for the sandbox's environment.

Nothing here is used by the production code path; it only completes the emulator.
``install()`` is idempotent.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from moto.core.responses import ActionResult
    from moto.ec2.responses.settings import Settings
    from moto.iam.responses import IamResponse
    from moto.servicequotas.models import ServiceQuotasBackend

Strings = str | list[str]  # an IAM element that takes one value or a list of them


class Statement(TypedDict, total=False):
    """One statement of an IAM policy document (IAM User Guide, "IAM JSON policy element
    reference"): the elements the simulation reads."""

    Effect: str
    Action: Strings
    NotAction: Strings
    Resource: Strings
    Condition: dict[str, dict[str, Strings]]  # operator -> key -> value(s)


class PolicyDocument(TypedDict, total=False):
    Version: str
    Statement: Statement | list[Statement]


EC2_QUOTAS: dict[str, float] = {}  # quota code -> value (vCPUs), set by tests
EBS_DEFAULT_KEYS: dict[str, str] = {}  # region -> the account's default EBS key, set by tests
# policy ARN -> the document as written (its Resource and Condition kept), for a policy
# moto was given another form of (the tests' enforced identities: moto's request checks
# need conditions dropped); the simulation evaluates this one
SHIPPED: dict[str, PolicyDocument] = {}
DEFAULT_VCPUS = 384.0  # enough for two 192-vCPU instances
NAMES = {
    "L-417A185B": "Running On-Demand P instances",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
}
_installed = False


def _documents(principal: object) -> list[PolicyDocument]:
    docs: list[PolicyDocument] = []
    for policy in list(getattr(principal, "managed_policies", {}).values()):
        if policy.arn in SHIPPED:  # the document as written, its conditions kept
            docs.append(SHIPPED[policy.arn])
            continue
        version = next(v for v in policy.versions if v.is_default)
        docs.append(
            json.loads(version.document) if isinstance(version.document, str) else version.document
        )
    for raw in getattr(principal, "policies", {}).values():
        docs.append(json.loads(raw) if isinstance(raw, str) else raw)
    return docs


def _listed(value: Strings | None) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _condition(
    condition: dict[str, dict[str, Strings]], context: dict[str, list[str]]
) -> tuple[bool, list[str]]:
    """(whether the statement's condition holds, the keys it needs that ``context`` lacks),
    as IAM evaluates it: every operator and every key must match; a key with no value in
    the request fails the condition, and the simulation lists it in
    ``MissingContextValues`` (IAM User Guide, "IAM JSON policy elements: Condition
    operators"; IAM API reference, SimulatePrincipalPolicy). String operators only."""
    holds, missing = True, []
    for operator, pairs in (condition or {}).items():
        for key, wanted in pairs.items():
            values = context.get(key.lower())
            if values is None:
                holds = False
                missing.append(key)
                continue
            wanted = _listed(wanted)
            if operator == "StringEquals":
                hit = any(v in wanted for v in values)
            elif operator == "StringEqualsIgnoreCase":
                hit = any(v.lower() in [w.lower() for w in wanted] for v in values)
            elif operator == "StringLike":
                hit = any(fnmatch.fnmatchcase(v, w) for v in values for w in wanted)
            elif operator == "StringNotEquals":
                hit = all(v not in wanted for v in values)
            else:
                raise NotImplementedError(
                    f"condition operator {operator} (imagectl.clouds.aws.sandbox_doctor)"
                )
            holds = holds and hit
    return holds, missing


def _action_matches(statement: Statement, action: str) -> bool:
    def any_of(patterns: list[str]) -> bool:
        return any(fnmatch.fnmatch(action.lower(), p.lower()) for p in patterns)

    if "NotAction" in statement:
        return not any_of(_listed(statement["NotAction"]))
    return any_of(_listed(statement.get("Action")))


def evaluate(
    documents: list[PolicyDocument], action: str, context: dict[str, list[str]] | None = None
) -> tuple[str, list[str]]:
    """(EvalDecision, MissingContextValues) of ``action`` for the principal holding
    ``documents``, on the simulation's default resource ``*``: an explicit deny wins; a
    statement allows when its action matches and its condition holds with ``context``."""
    context = {k.lower(): v for k, v in (context or {}).items()}
    allowed, missing = False, []
    for doc in documents:
        for st in _listed_statements(doc):
            if not _action_matches(st, action):
                continue
            holds, lacking = _condition(st.get("Condition") or {}, context)
            if st.get("Effect") == "Deny" and holds:
                return "explicitDeny", []
            if st.get("Effect") == "Allow":
                allowed = allowed or holds
                missing += lacking
    if allowed:
        return "allowed", []
    return "implicitDeny", sorted(set(missing))


def _listed_statements(doc: PolicyDocument) -> list[Statement]:
    st = doc.get("Statement", [])
    return [st] if isinstance(st, dict) else list(st)


def decide(documents: list[PolicyDocument], action: str) -> str:
    return evaluate(documents, action)[0]


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse
    from moto.servicequotas.models import ServiceQuotasBackend

    def simulate_principal_policy(self: IamResponse) -> ActionResult:
        arn = self._get_param("PolicySourceArn")
        actions = self._get_param("ActionNames", [])
        name = arn.rsplit("/", 1)[-1]
        principal = self.backend.get_user(name) if ":user/" in arn else self.backend.get_role(name)
        docs = _documents(principal)
        context = {
            str(e.get("ContextKeyName")): _listed(e.get("ContextKeyValues"))
            for e in self._get_param("ContextEntries", []) or []
        }
        results = []
        for a in actions:
            decision, missing = evaluate(docs, a, context)
            results.append(
                {
                    "EvalActionName": a,
                    "EvalResourceName": "*",
                    "EvalDecision": decision,
                    "MissingContextValues": missing,
                }
            )
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy  # type: ignore[attr-defined]
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(
        self: ServiceQuotasBackend, service_code: str, quota_code: str
    ) -> dict[str, Any]:
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

    from moto.ec2.responses.settings import Settings

    def get_ebs_default_kms_key_id(self: Settings) -> ActionResult:
        """EC2 GetEbsDefaultKmsKeyId (moto has none): the account's default key per
        Region, ``EBS_DEFAULT_KEYS``, else the AWS managed key's alias ARN, as EC2 answers
        when no customer managed key was set."""
        region = self.region
        key = EBS_DEFAULT_KEYS.get(region) or (
            f"arn:aws:kms:{region}:{self.current_account}:alias/aws/ebs"
        )
        return ActionResult({"KmsKeyId": key})

    Settings.get_ebs_default_kms_key_id = get_ebs_default_kms_key_id  # type: ignore[attr-defined]


def sandbox_identity(endpoint: str, images: Path, roles: tuple[str, ...]) -> dict[str, str]:
    """An IAM user holding exactly the shipped documents of ``roles``
    (``images/permissions/aws/<role>.json``, conditions kept), and its credentials."""
    import boto3

    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=endpoint)
    name = "imagectl-sandbox"
    iam.create_user(UserName=name)
    for role in roles:
        text = (images / "permissions" / "aws" / f"{role}.json").read_text(encoding="utf-8")
        arn = iam.create_policy(PolicyName=f"imagectl-{role}", PolicyDocument=text)
        iam.attach_user_policy(UserName=name, PolicyArn=arn["Policy"]["Arn"])
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
    }
