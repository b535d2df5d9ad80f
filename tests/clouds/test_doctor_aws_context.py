"""`imagectl doctor --cloud aws` tells the truth about an identity's documents.

IAM evaluates a policy's ``Condition`` only against the ``ContextEntries`` the simulation
supplies and lists the keys it lacked in ``MissingContextValues`` (IAM API reference,
SimulatePrincipalPolicy, ContextEntry); the simulation here does the same
(``tests/fakes/moto_doctor.py``: moto itself evaluates actions only). So a
condition-granted action (validate's ``ec2:TerminateInstances`` under
``aws:ResourceTag/imagectl:managed``) is tested as such: the doctor passes the context
imagectl's calls carry, reports a key it cannot supply as "cannot decide", never as a
denial (an unparsable answer: tests/clouds/test_doctor_no_traceback.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagectl.clouds.aws.doctor import call_context
from tests.clouds.test_doctor import RUNNER, STACK, merged, own_ids
from tests.fakes import moto_doctor
from tests.fakes import permissions as perm

REGION = "us-east-1"


@pytest.fixture
def aws_account(workspace_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    own_ids(workspace_copy)
    with moto_doctor.account(monkeypatch):
        yield workspace_copy


def _doctor(cli: Any, root: Path, monkeypatch: pytest.MonkeyPatch, doc: Any) -> Any:
    with perm.aws_enforced(monkeypatch, None, doc):
        return cli("--root", str(root), "doctor", "--stack", STACK, "--cloud", "aws",
                   "--runner-cidr", RUNNER)  # fmt: skip


def _status(result: Any, status: str, check: str = "permissions") -> list[str]:
    return [ln for ln in result.out.splitlines() if ln.split()[:2] == [status, check]]


def test_a_condition_granted_action_is_decided_with_the_calls_context() -> None:
    docs = [perm.load_document("aws", "validate")]
    bare = moto_doctor.evaluate(docs, "ec2:TerminateInstances")
    assert bare == ("implicitDeny", ["aws:ResourceTag/imagectl:managed"])
    context = {e["ContextKeyName"]: e["ContextKeyValues"] for e in call_context(REGION)}
    assert moto_doctor.evaluate(docs, "ec2:TerminateInstances", context) == ("allowed", [])
    other = {**context, "aws:ResourceTag/imagectl:managed": ["false"]}
    assert moto_doctor.evaluate(docs, "ec2:TerminateInstances", other)[0] == "implicitDeny"


def test_green_for_exactly_build_and_validate(
    cli: Any, aws_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _doctor(cli, aws_account, monkeypatch, merged("aws"))
    assert result.code == 0, result.out + result.err
    assert _status(result, "blocker") == [] and _status(result, "warning") == []


@pytest.mark.parametrize("action", ["ec2:TerminateInstances", "ec2:RunInstances", "iam:PassRole"])
def test_removing_one_permission_reports_exactly_that_action(
    cli: Any, aws_account: Path, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    doc = perm.without("aws", merged("aws"), action)
    if action == "ec2:TerminateInstances":  # build grants it unconditioned (Packer): both go
        doc = perm.without("aws", doc, action)
    result = _doctor(cli, aws_account, monkeypatch, doc)
    assert result.code == 1
    blockers = [ln for ln in result.out.splitlines() if ln.startswith("blocker")]
    assert len(blockers) == 1 and f"may not {action} " in blockers[0] + " ", result.out
    assert "images/permissions/aws/" in blockers[0]


def test_a_key_imagectl_does_not_carry_is_cannot_decide_not_a_denial(
    cli: Any, aws_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = merged("aws")
    for st in doc["Statement"]:
        if "ec2:DescribeImages" in st["Action"]:
            st["Action"] = [a for a in st["Action"] if a != "ec2:DescribeImages"]
    doc["Statement"].append(
        {
            "Effect": "Allow",
            "Action": ["ec2:DescribeImages"],
            "Resource": "*",
            "Condition": {"IpAddress": {"aws:SourceIp": "52.94.76.0/24"}},
        }
    )
    doc["Statement"][-1]["Condition"] = {"StringEquals": {"aws:SourceVpce": "vpce-1a2b3c4d"}}
    result = _doctor(cli, aws_account, monkeypatch, doc)
    assert _status(result, "blocker") == [], result.out
    warnings = _status(result, "warning")
    assert len(warnings) == 1, result.out
    line = warnings[0]
    assert "cannot decide" in line and "ec2:DescribeImages" in line
    assert "aws:SourceVpce" in line


def test_default_ebs_encryption_with_the_aws_managed_key_blocks_sharing_before_spend(
    cli: Any, aws_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    boto3.client("ec2", region_name=REGION).enable_ebs_encryption_by_default()
    result = _doctor(cli, aws_account, monkeypatch, merged("aws"))
    (line,) = _status(result, "blocker", "resources")
    assert "aws/ebs" in line and "cannot be shared" in line and "kms_key_ids" in line
    moto_doctor.EBS_DEFAULT_KEYS[REGION] = (
        f"arn:aws:kms:{REGION}:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    result = _doctor(cli, aws_account, monkeypatch, merged("aws"))
    assert result.code == 0, result.out


def test_tag_on_create_conditions_are_decided_with_the_create_actions() -> None:
    """A CreateTags statement limited to tag-on-create (``ec2:CreateAction``) is decided
    with the create calls imagectl tags through (its ``TagSpecifications``)."""
    docs = [
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "ec2:CreateTags",
                    "Resource": "*",
                    "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
                }
            ]
        }
    ]
    assert moto_doctor.evaluate(docs, "ec2:CreateTags")[1] == ["ec2:CreateAction"]
    context = {e["ContextKeyName"]: e["ContextKeyValues"] for e in call_context(REGION)}
    assert moto_doctor.evaluate(docs, "ec2:CreateTags", context) == ("allowed", [])
