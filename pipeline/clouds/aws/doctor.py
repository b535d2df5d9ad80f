"""The account checks on AWS: STS for who is calling, IAM policy simulation
(SimulatePrincipalPolicy) for each action of the roles' documents, Service Quotas for
the On-Demand vCPU quota each validation shape counts against, EC2 for the shape's
offering in the build region (or the capacity reservation the stack names), and SSM for
the "latest" parameter the promotion writes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from imagectl.clouds.aws.clients import AwsClients
from imagectl.clouds.aws.pointers import parameter_name
from imagectl.clouds.aws.spec import SPEC as AWS
from imagectl.clouds.aws.stack import AwsCloud
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.needs import DocumentFormat, permissions
from imagectl.doctor.quota import NETWORK, Quota, QuotaApi, quota_findings
from imagectl.stacks import ResolvedStack
from imagectl.tags import TAG_MANAGED


def _names(doc: Any) -> list[str]:
    """An IAM policy's actions (each statement's Action: one or a list)."""
    names: list[str] = []
    for st in doc["Statement"]:
        action = st["Action"]
        names += [action] if isinstance(action, str) else list(action)
    return names


FORMAT = DocumentFormat("json", _names)
ENDPOINT_ENV = ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL")

# the error codes of IAM's refusal (IAM's and JSON APIs' AccessDenied(Exception), EC2's
# UnauthorizedOperation)
DENIED = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")
ASSUMED = re.compile(r"^arn:(?P<p>[^:]+):sts::(?P<acct>\d+):assumed-role/(?P<role>[^/]+)/")


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__))


def principal_arn(arn: str) -> str:
    """The IAM principal to simulate: an assumed role's session is its role."""
    m = ASSUMED.match(arn)
    return f"arn:{m['p']}:iam::{m['acct']}:role/{m['role']}" if m else arn


def _failed(exc: Exception) -> str:
    """One line for any SDK, parse or network error (botocore's ClientError names its
    code; a response botocore cannot parse, a connection error: the exception's first
    line)."""
    code = _code(exc) if hasattr(exc, "response") else type(exc).__name__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{code}: {text}"[:300] if text and text != code else code


CREATE_ACTIONS = (
    "AllocateAddress",
    "CopyImage",
    "CreatePlacementGroup",
    "CreateSecurityGroup",
    "RunInstances",
)


def call_context(region: str) -> list[dict[str, Any]]:
    """The condition keys imagectl's own calls carry, as ``ContextEntries`` for the
    simulation: IAM evaluates a ``Condition`` only against the keys the caller supplies and
    lists the others in ``MissingContextValues`` (IAM API reference, ContextEntry,
    SimulatePrincipalPolicy). Every instance, security group and placement group imagectl
    terminates or deletes carries its ``imagectl:managed=true`` tag, and tags what it
    creates with it; it passes an instance profile's role to EC2 only; its KMS use is
    EC2's, on its behalf (CopyImage / encrypted volumes)."""

    def entry(key: str, value: str) -> dict[str, Any]:
        return {"ContextKeyName": key, "ContextKeyValues": [value], "ContextKeyType": "string"}

    return [
        # the tag-on-create calls that tag what they create (TagSpecifications): a
        # CreateTags statement may be limited to them (EC2 User Guide, "Grant permission to
        # tag Amazon EC2 resources during creation")
        {
            "ContextKeyName": "ec2:CreateAction",
            "ContextKeyValues": list(CREATE_ACTIONS),
            "ContextKeyType": "stringList",
        },
        entry(f"aws:ResourceTag/{TAG_MANAGED}", "true"),
        entry(f"aws:RequestTag/{TAG_MANAGED}", "true"),
        entry("iam:PassedToService", "ec2.amazonaws.com"),
        entry("kms:ViaService", f"ec2.{region}.amazonaws.com"),
    ]


def diagnose(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, settings: AwsCloud
) -> list[Finding]:
    from botocore.exceptions import ClientError

    clients = connect(settings)
    region = settings.build.region
    out: list[Finding] = []
    try:
        who = clients.client("sts").get_caller_identity()
    except Exception as exc:  # refused, unparsable, unreachable: one finding, no traceback
        return [
            Finding(
                "credentials",
                BLOCKER,
                f"STS GetCallerIdentity failed: {_failed(exc)}",
                "configure credentials (OIDC role, AWS_PROFILE) for the account",
            )
        ]
    caller = principal_arn(str(who["Arn"]))
    out.append(Finding("credentials", OK, f"AWS account {who['Account']} as {caller}"))
    out += _simulate(clients, caller, images, roles, region)

    ec2 = clients.ec2(region)
    out += quota_findings(images, settings.validation_shapes, hosts, quota_api(clients, settings))
    for shape in settings.validation_shapes:
        out += _guarded(
            "capacity",
            "EC2 DescribeInstanceTypeOfferings/CapacityReservations",
            lambda shape=shape: _capacity(ec2, settings, region, shape, hosts),
        )
    out += _guarded(
        "resources",
        "EC2 GetEbsEncryptionByDefault/GetEbsDefaultKmsKeyId",
        lambda: _ebs_sharing(ec2, resolved, region),
    )

    name = parameter_name(settings.ssm_parameter_prefix, resolved.name, "latest")
    try:
        param = clients.ssm(region).get_parameter(Name=name)["Parameter"]
    except ClientError as exc:
        if _code(exc) == "ParameterNotFound":
            out.append(
                Finding(
                    "resources",
                    OK,
                    f"SSM parameter {name} is free (the first promotion creates it)",
                )
            )
        else:
            out.append(
                Finding(
                    "resources",
                    BLOCKER,
                    f"cannot read SSM parameter {name} ({_code(exc)})",
                    "grant ssm:GetParameter",
                )
            )
    except Exception as exc:
        out.append(
            Finding(
                "resources",
                BLOCKER,
                f"SSM GetParameter failed: {_failed(exc)}",
                NETWORK,
            )
        )
    else:
        if param.get("DataType", "text") != "aws:ec2:image":
            out.append(
                Finding(
                    "resources",
                    BLOCKER,
                    f"SSM parameter {name} exists with data "
                    f"type {param.get('DataType', 'text')}, not aws:ec2:image",
                    f"delete it or choose another stack name: aws ssm "
                    f"delete-parameter --name {name}",
                )
            )
        else:
            out.append(Finding("resources", OK, f"SSM parameter {name} is an aws:ec2:image"))
    return out


def _guarded(check_name: str, call: str, run: Any) -> list[Finding]:
    """``run()``'s findings, or one blocker naming ``call`` when the SDK, the response's
    parsing or the network fails."""
    try:
        return list(run())
    except Exception as exc:
        return [
            Finding(
                check_name,
                BLOCKER,
                f"{call} failed: {_failed(exc)}",
                "check the permission named in images/permissions/aws/build.json, "
                "the endpoint and the network, then run doctor again",
            )
        ]


def _simulate(
    clients: Any, caller: str, images: Path, roles: tuple[str, ...], region: str
) -> list[Finding]:
    """Each action of the roles' documents simulated for ``caller`` with the context the
    real calls carry: a denial is a blocker naming the action and its document; an action
    IAM cannot decide without a key imagectl's calls do not carry is said so, never
    reported as a denial."""
    needed = permissions(images, AWS.name, roles, FORMAT)
    names = [n.permission for n in needed]
    denied: list[str] = []
    undecided: dict[str, list[str]] = {}
    try:
        for start in range(0, len(names), 100):  # at most 100 actions a call
            pages = (
                clients.client("iam")
                .get_paginator("simulate_principal_policy")
                .paginate(
                    PolicySourceArn=caller,
                    ActionNames=names[start : start + 100],
                    ContextEntries=call_context(region),
                )
            )
            for page in pages:
                for r in page["EvaluationResults"]:
                    if r["EvalDecision"] == "allowed":
                        continue
                    missing = list(r.get("MissingContextValues") or [])
                    if missing and r["EvalDecision"] != "explicitDeny":
                        undecided[r["EvalActionName"]] = missing
                    else:
                        denied.append(r["EvalActionName"])
    except Exception as exc:
        fix = (
            "grant iam:SimulatePrincipalPolicy (images/permissions/aws/build.json)"
            if _refused(exc)
            else NETWORK
        )
        return [
            Finding(
                "permissions",
                BLOCKER,
                f"cannot simulate {caller}'s policies: IAM SimulatePrincipalPolicy "
                f"failed: {_failed(exc)}",
                fix,
            )
        ]
    where = {n.permission: n.document for n in needed}
    out = [
        Finding(
            "permissions",
            BLOCKER,
            f"{caller} may not {action}",
            f"add it from {where.get(action, 'the role document')}",
        )
        for action in denied
    ]
    out += [
        Finding(
            "permissions",
            WARNING,
            f"cannot decide whether {caller} may {action} without {', '.join(keys)} "
            "(its policy's condition needs a key imagectl's calls do not carry)",
            f"compare the condition with {where.get(action, 'the role document')}",
        )
        for action, keys in undecided.items()
    ]
    if not denied and not undecided:
        out.append(
            Finding("permissions", OK, f"all {len(names)} actions of {', '.join(roles)} allowed")
        )
    return out


def _ebs_sharing(ec2: Any, resolved: ResolvedStack, region: str) -> list[Finding]:
    """The account's default EBS encryption, read before any spend: with the AWS managed
    key (``aws/ebs``) the build's AMI cannot be shared ("AMIs backed by snapshots encrypted
    with the default AWS managed key cannot be shared": EC2 User Guide, "Share an AMI with
    specific AWS accounts") unless the stack names its own key for the build region
    (``clouds.aws.kms_key_ids``), which the build then encrypts with."""
    settings = resolved.stack.clouds.section_of(AwsCloud)
    assert settings is not None
    on = bool(ec2.get_ebs_encryption_by_default().get("EbsEncryptionByDefault"))
    key = str(ec2.get_ebs_default_kms_key_id().get("KmsKeyId") or "")
    shares = bool(settings.share.accounts or settings.share.organizations)
    aws_managed = not key or key.endswith("alias/aws/ebs")
    if on and aws_managed and shares and region not in settings.kms_key_ids:
        return [
            Finding(
                "resources",
                BLOCKER,
                f"{region} encrypts new EBS volumes by default with the AWS managed key "
                "(aws/ebs), and the stack shares its AMIs: an AMI on that key cannot be shared",
                f"name a customer managed key of {region} in clouds.aws.kms_key_ids (and grant "
                "the accounts you share with its use in the key policy), or set another default "
                f"key: aws ec2 modify-ebs-default-kms-key-id --region {region} --kms-key-id <key>",
            )
        ]
    state = f"on ({key or 'aws/ebs'})" if on else "off"
    return [Finding("resources", OK, f"default EBS encryption in {region}: {state}")]


def service_quota(clients: Any, region: str, code: str) -> float:
    """An EC2 quota's value in the region (Service Quotas GetServiceQuota)."""
    return float(
        clients.client("service-quotas", region).get_service_quota(
            ServiceCode="ec2", QuotaCode=code
        )["Quota"]["Value"]
    )


def read_quota(region: str, value: float, entry: Mapping[str, Any], hosts: int) -> Quota:
    """The On-Demand vCPU quota a shape counts against (the quota's value; AWS reports no
    use beside it)."""
    wanted = int(entry["vcpus"]) * hosts
    code = entry["quota_code"]
    return Quota(
        label=f"{entry['quota_name']} ({code}) in {region}",
        wanted=wanted,
        free=value,
        unit=" vCPUs",
        increase=f"request an increase: aws service-quotas request-service-quota-increase "
        f"--service-code ec2 --quota-code {code} --desired-value {wanted} --region {region}",
    )


def _refused(exc: Exception) -> bool:
    """IAM's refusal, in the words each API uses for it."""
    return hasattr(exc, "response") and _code(exc) in DENIED


def quota_api(clients: Any, settings: AwsCloud) -> QuotaApi[float]:
    """Service Quotas GetServiceQuota in the build region, read once a quota code."""
    region = settings.build.region
    return QuotaApi(
        where=region,
        call="Service Quotas GetServiceQuota",
        permission="servicequotas:GetServiceQuota",
        read=partial(service_quota, clients, region),
        quota=read_quota,
        refused=_refused,
        key=lambda entry: str(entry["quota_code"]),
        explain=_failed,
    )


def _capacity(ec2: Any, settings: Any, region: str, shape: str, hosts: int) -> list[Finding]:
    capacity = settings.validation_capacity
    if capacity is not None:
        rid = capacity.reservation_id
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
        res = (found.get("CapacityReservations") or [None])[0]
        if res is None or res.get("State") != "active":
            state = res.get("State") if res else "missing"
            return [
                Finding(
                    "capacity",
                    BLOCKER,
                    f"capacity reservation {rid} is {state}",
                    "create or renew it, or remove clouds.aws.validation_capacity",
                )
            ]
        free = int(res.get("AvailableInstanceCount", 0))
        if free < hosts:
            return [
                Finding(
                    "capacity",
                    BLOCKER,
                    f"capacity reservation {rid} has {free} free "
                    f"instance(s); the run needs {hosts}",
                    "wait for running instances to end, or enlarge the reservation",
                )
            ]
        return [
            Finding(
                "capacity",
                OK,
                f"capacity reservation {rid}: {free} free in {res.get('AvailabilityZone')}",
            )
        ]
    offered = ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": [shape]}],
    )["InstanceTypeOfferings"]
    zones = sorted(o["Location"] for o in offered)
    if not zones:
        return [
            Finding(
                "capacity",
                BLOCKER,
                f"{shape} is not offered in any zone of {region}",
                "choose a region that offers it, or a capacity reservation / block",
            )
        ]
    return [
        Finding(
            "capacity",
            OK,
            f"{shape} offered in {', '.join(zones)} (on demand: "
            "availability is known only at launch; a reservation makes it certain)",
        )
    ]


def connect(settings: AwsCloud) -> AwsClients:
    """This cloud's clients for the stack's settings."""
    return AwsClients(region=settings.build.region)
