"""`imagectl doctor --stack h100-training --cloud aws` against the docs' sandbox
(`python -m imagectl.clouds.aws.sandbox`, a subprocess, as docs/sandbox.md starts it): the
sandbox's environment is an identity holding exactly the shipped build and validate
documents, and the doctor reports no denial for it (the only blocker is the shipped
stack's example organization, a placeholder); with one permission taken out of its policy,
exactly that action is reported."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clouds.test_aws_moto_server_e2e import _free_port, _sandbox
from tests.fakes import permissions as perm
from tests.support import flat

REPO = Path(__file__).resolve().parents[2]
IMAGECTL = str(Path(sys.executable).parent / "imagectl")
RUNNER = "52.94.76.10/32"


def _exports(env_file: Path) -> dict[str, str]:
    words = shlex.split(env_file.read_text())
    assert words[0] == "export"
    return dict(w.split("=", 1) for w in words[1:])


def _doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [IMAGECTL, "doctor", "--stack", "h100-training", "--cloud", "aws",
         "--runner-cidr", RUNNER],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _blockers(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("blocker")]


@pytest.mark.slow
def test_doctor_on_the_readme_sandbox_reports_no_denial(tmp_path: Path) -> None:
    import boto3

    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "IMAGECTL_"))}
    base["IMAGECTL_STATE_DIR"] = str(tmp_path / "state")
    override = tmp_path / "state" / "sandbox" / "sandbox-replay.yaml"
    proc = _sandbox(_free_port(), override, base)
    try:
        env = {**base, **_exports(override.parent / "sandbox.env")}
        run = _doctor(env)
        out = run.stdout + run.stderr
        assert "Traceback" not in flat(out)
        assert [ln.split()[1] for ln in _blockers(run.stdout)] == ["placeholder"], out
        assert "may not" not in flat(out) and "cannot decide" not in flat(out)
        assert "all" in flat(run.stdout) and "actions of build, validate allowed" in flat(
            run.stdout
        )

        # one permission out of the identity's validate policy: exactly it is reported
        iam = boto3.client(
            "iam", region_name="us-east-1", endpoint_url=env["IMAGECTL_AWS_ENDPOINT_URL"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )  # fmt: skip
        (policy,) = [p for p in iam.list_policies(Scope="Local")["Policies"]
                     if p["PolicyName"] == "imagectl-validate"]  # fmt: skip
        doc = perm.without("aws", perm.load_document("aws", "validate"), "ec2:DescribeVpcs")
        iam.create_policy_version(PolicyArn=policy["Arn"], PolicyDocument=json.dumps(doc),
                                  SetAsDefault=True)  # fmt: skip
        run = _doctor(env)
        denied = [ln for ln in _blockers(run.stdout) if "may not" in ln]
        assert len(denied) == 1 and "may not ec2:DescribeVpcs " in denied[0], run.stdout
        assert "images/permissions/aws/validate.json" in denied[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
