"""The AWS path as a new user runs it, against a moto server: `imagectl build` runs the
real Packer amazon-ebs build, `imagectl validate-image` launches instances through boto3
and validates them (test-mode inventory: this machine replays a snapshot), both as real
subprocesses; and a run interrupted with SIGINT terminates its instances."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes.fixtures import resolved_stack
from tests.support import require_tool

REPO = Path(__file__).resolve().parents[2]
IMAGECTL = str(Path(sys.executable).parent / "imagectl")


def _env(endpoint: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        IMAGECTL_AWS_ENDPOINT_URL=endpoint,
        IMAGECTL_CLOUD_POLL_S="0.2",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        PYTHONUNBUFFERED="1",
    )
    return env


def _live(endpoint: str) -> list[str]:
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=endpoint)
    found = []
    for r in ec2.describe_instances(
        Filters=[
            {"Name": "tag:imagectl:managed", "Values": ["true"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )["Reservations"]:
        found.extend(i["InstanceId"] for i in r["Instances"])
    return found


@pytest.mark.slow
def test_build_then_validate_from_the_command_line(moto_server: str, tmp_path: Path) -> None:
    require_tool("packer")
    from imagectl.clouds.aws.sandbox import seed_base_image

    seed_base_image(moto_server, resolved_stack())
    env = _env(moto_server)
    build = subprocess.run(
        [
            IMAGECTL,
            "build",
            "--stack",
            "h100-training",
            "--cloud",
            "aws",
            "--skip-provisioning",
            "--json",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    built = json.loads(build.stdout)
    (image,) = built["images"]
    assert image["image_id"].startswith("ami-") and image["region"] == "us-east-1"

    override = write_override(tmp_path, [HEALTHY, HEALTHY])
    run = subprocess.run(
        [
            IMAGECTL,
            "validate-image",
            image["image_id"],
            "--cloud",
            "aws",
            "--hosts",
            "2",
            "--inventory-override",
            str(override),
            "--sandbox",
            "--json",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["state"] == "validated"
    assert result["receipts"] == "sandbox replay"  # the try-it path says what it is
    assert result["stack"] == "h100-training"  # found through the catalog record of the build
    assert len(result["terminated"]) == 2
    assert _live(moto_server) == []
    # The gate accepts the sandbox replays (the stack asks for quick: coverage is recorded)
    plan = subprocess.run(
        [IMAGECTL, "promote", image["image_id"], "--dry-run"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]


@pytest.mark.slow
def test_sigint_mid_run_terminates_the_instances(
    moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.aws_faults import AwsFaults
    from tests.fakes.fixtures import CloudEnv

    faults = AwsFaults().__enter__()
    try:
        faults.never_running()  # the run waits for its instance: interrupt it there
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        import boto3

        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
        image_id = ec2.register_image(Name="cand", RootDeviceName="/dev/sda1")["ImageId"]
        env_tags = CloudEnv("aws", faults).tags()
        ec2.create_tags(
            Resources=[image_id], Tags=[{"Key": k, "Value": v} for k, v in env_tags.items()]
        )
        proc = subprocess.Popen(
            [
                IMAGECTL,
                "validate-image",
                image_id,
                "--cloud",
                "aws",
                "--stack",
                "h100-training",
                "--inventory-override",
                str(write_override(tmp_path, [HEALTHY])),
                "--reach-timeout",
                "300",
                "--json",
            ],
            cwd=REPO,
            env=_env(moto_server),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not _live(moto_server):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no instance was launched"
            time.sleep(0.2)
        time.sleep(1.0)  # now waiting for the instance to become reachable
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err[-2000:]
        assert _live(moto_server) == []
    finally:
        faults.__exit__(None, None, None)
