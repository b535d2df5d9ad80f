"""The account checks on AWS: STS for who is calling, IAM policy simulation
(SimulatePrincipalPolicy) for each action of the roles' documents, Service Quotas for
the On-Demand vCPU quota each validation shape counts against, EC2 for the shape's
offering in the build region (or the capacity reservation the stack names), and SSM for
the "latest" parameter the promotion writes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from imagectl.clouds.aws.clients import AwsClients
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding
from imagectl.doctor.needs import DocumentFormat, permissions, quota
from imagectl.stacks import ResolvedStack


def _names(doc: Any) -> list[str]:
    """An IAM policy's actions (each statement's Action: one or a list)."""
    names: list[str] = []
    for st in doc["Statement"]:
        action = st["Action"]
        names += [action] if isinstance(action, str) else list(action)
    return names


FORMAT = DocumentFormat("json", _names)
ENDPOINT_ENV = ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL")

ASSUMED = re.compile(r"^arn:(?P<p>[^:]+):sts::(?P<acct>\d+):assumed-role/(?P<role>[^/]+)/")


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__))


def principal_arn(arn: str) -> str:
    """The IAM principal to simulate: an assumed role's session is its role."""
    m = ASSUMED.match(arn)
    return f"arn:{m['p']}:iam::{m['acct']}:role/{m['role']}" if m else arn


def check(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, clients: Any
) -> list[Finding]:
    from botocore.exceptions import BotoCoreError, ClientError

    settings = resolved.stack.clouds.aws
    assert settings is not None  # doctor.run checked the stack targets aws
    region = settings.build.region
    out: list[Finding] = []
    try:
        who = clients.client("sts").get_caller_identity()
    except (ClientError, BotoCoreError) as exc:
        return [
            Finding(
                "credentials",
                BLOCKER,
                f"AWS refused the credentials: {exc}",
                "configure credentials (OIDC role, AWS_PROFILE) for the account",
            )
        ]
    caller = principal_arn(str(who["Arn"]))
    out.append(Finding("credentials", OK, f"AWS account {who['Account']} as {caller}"))

    needed = permissions(images, "aws", roles, FORMAT)
    try:
        denied: list[str] = []
        names = [n.permission for n in needed]
        for start in range(0, len(names), 100):  # at most 100 actions a call
            pages = (
                clients.client("iam")
                .get_paginator("simulate_principal_policy")
                .paginate(PolicySourceArn=caller, ActionNames=names[start : start + 100])
            )
            for page in pages:
                denied += [
                    r["EvalActionName"]
                    for r in page["EvaluationResults"]
                    if r["EvalDecision"] != "allowed"
                ]
    except ClientError as exc:
        out.append(
            Finding(
                "permissions",
                BLOCKER,
                f"cannot simulate {caller}'s policies ({_code(exc)})",
                "grant iam:SimulatePrincipalPolicy (images/permissions/aws/build.json)",
            )
        )
    else:
        where = {n.permission: n.document for n in needed}
        for action in denied:
            out.append(
                Finding(
                    "permissions",
                    BLOCKER,
                    f"{caller} may not {action}",
                    f"add it from {where.get(action, 'the role document')}",
                )
            )
        if not denied:
            out.append(
                Finding(
                    "permissions", OK, f"all {len(names)} actions of {', '.join(roles)} allowed"
                )
            )

    ec2 = clients.ec2(region)
    for shape in settings.validation_shapes:
        out += _quota(clients, region, shape, images, hosts)
        out += _capacity(ec2, settings, region, shape, hosts)

    name = f"{settings.ssm_parameter_prefix}/{resolved.name}/latest"
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


def _quota(clients: Any, region: str, shape: str, images: Path, hosts: int) -> list[Finding]:
    from botocore.exceptions import ClientError

    entry = quota(images, shape)
    if entry is None:
        return [
            Finding(
                "quota",
                WARNING,
                f"no quota known for {shape}",
                "add it to images/catalog/quotas.yaml",
            )
        ]
    wanted = int(entry["vcpus"]) * hosts
    code = entry["quota_code"]
    try:
        value = clients.client("service-quotas", region).get_service_quota(
            ServiceCode="ec2", QuotaCode=code
        )["Quota"]["Value"]
    except ClientError as exc:
        return [
            Finding(
                "quota",
                WARNING,
                f"cannot read quota {code} ({_code(exc)})",
                "grant servicequotas:GetServiceQuota",
            )
        ]
    label = f"{entry['quota_name']} ({code}) in {region}"
    if value < wanted:
        return [
            Finding(
                "quota",
                BLOCKER,
                f"{label} is {value:g} vCPUs; {hosts} x {shape} needs {wanted}",
                f"request an increase: aws service-quotas request-service-quota-increase "
                f"--service-code ec2 --quota-code {code} --desired-value {wanted} "
                f"--region {region}",
            )
        ]
    return [Finding("quota", OK, f"{label}: {value:g} vCPUs >= {wanted}")]


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


def diagnose(
    resolved: ResolvedStack, images: Path, roles: tuple[str, ...], *, hosts: int, settings: Any
) -> list[Finding]:
    """The account checks with this cloud's clients, built from the stack's settings."""
    return check(
        resolved, images, roles, hosts=hosts, clients=AwsClients(region=settings.build.region)
    )
