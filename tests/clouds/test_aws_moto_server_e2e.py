"""The AWS path as a new user runs it, against a moto server: `imagectl build` runs the
real Packer amazon-ebs build, `imagectl validate-image` launches instances through boto3
and validates them (test-mode inventory: this machine replays a snapshot), both as real
subprocesses; docs/sandbox.md's "Try the AWS path" steps followed literally against its
sandbox server (`python -m imagectl.clouds.aws.sandbox`) through promote and rollback;
and a run interrupted with SIGINT terminates its instances.

The build (Packer and imagectl around it) and `imagectl doctor` run as an IAM user holding
exactly images/permissions/aws/build.json, which moto enforces (tests/fakes/permissions.py):
nothing is refused, every entry is used by one of the runs or is the amazon-ebs builder's
own (images/permissions/builders.yaml, Packer's documented policy), and a build without
ec2:RunInstances fails with imagectl's error naming it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from imagectl.building.stand_in import SOURCE_VALUE as SBOM_STAND_IN
from imagectl.core.yamlfast import load_data
from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes import moto_doctor
from tests.fakes import permissions as perm
from tests.fakes.fixtures import resolved_stack
from tests.support import default_signals, require_tool

REPO = Path(__file__).resolve().parents[2]
IMAGECTL = str(Path(sys.executable).parent / "imagectl")


def _env(endpoint: str, *, enforced: bool = False) -> dict[str, str]:
    """The commands' environment; ``enforced``: with the keys of the IAM user that
    ``perm.aws_enforced`` put in this process's environment, not moto's defaults."""
    env = dict(os.environ)
    env.update(
        IMAGECTL_AWS_ENDPOINT_URL=endpoint,
        IMAGECTL_CLOUD_POLL_S="0.2",
        AWS_DEFAULT_REGION="us-east-1",
        PYTHONUNBUFFERED="1",
    )
    if not enforced:
        env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    return env


BUILD = [IMAGECTL, "build", "--stack", "h100-training", "--cloud", "aws", "--skip-provisioning"]


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
def test_build_then_validate_from_the_command_line(
    moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    require_tool("packer")
    from imagectl.clouds.aws.sandbox import seed_base_image

    seed_base_image(moto_server, resolved_stack())
    env = _env(moto_server)
    doc = perm.load_document("aws", "build")
    with perm.aws_enforced(monkeypatch, moto_server, doc) as run:
        build = subprocess.run(
            [*BUILD, "--json"], cwd=REPO, env=_env(moto_server, enforced=True),
            capture_output=True, text=True, timeout=400,
        )  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    assert run.refused == [], run.refused
    moto_doctor.install()
    with perm.aws_enforced(monkeypatch, moto_server, doc) as doctor:
        checked = cli("doctor", "--stack", "h100-training", "--cloud", "aws", "--role", "build")
    assert [ln.split()[1] for ln in checked.out.splitlines() if ln.startswith("blocker")] == [
        "placeholder"  # the shipped stack's example organization; every account check ran
    ], checked.out
    assert doctor.refused == [], doctor.refused
    builder = set(
        load_data(REPO / "images" / "permissions" / "builders.yaml")["aws"]["permissions"]
    )
    assert builder <= set(perm.granted("aws", doc))
    # ec2:DescribeCapacityReservations: the doctor's, when the stack names a reservation
    reservation = {"ec2:DescribeCapacityReservations"}
    assert set(perm.unused("aws", doc, run, doctor)) - builder - reservation == set()
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
def test_a_build_without_run_instances_fails_naming_it(
    moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packer's amazon-ebs launch refused (AWS: "is not authorized to perform:
    ec2:RunInstances"): the build fails at once, and imagectl's error names it."""
    require_tool("packer")
    from imagectl.clouds.aws.sandbox import seed_base_image

    seed_base_image(moto_server, resolved_stack())
    doc = perm.without("aws", perm.load_document("aws", "build"), "ec2:RunInstances")
    with perm.aws_enforced(monkeypatch, moto_server, doc) as run:
        build = subprocess.run(
            BUILD, cwd=REPO, env=_env(moto_server, enforced=True), capture_output=True,
            text=True, timeout=400,
        )  # fmt: skip
    assert run.refused == ["ec2:RunInstances"]
    error = build.stderr[build.stderr.rfind("error: ") :]
    assert build.returncode != 0 and "ec2:RunInstances" in error, build.stderr[-3000:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sandbox(port: int, override: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """docs/sandbox.md step 1: the seeded local AWS, started as the page starts it; returns once
    it says it is serving."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "imagectl.clouds.aws.sandbox",
            "--port",
            str(port),
            "--stack",
            "h100-training",
            "--override",
            str(override),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals,
    )
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("inventory override:"):
            return proc
        assert time.monotonic() < deadline, "".join(seen)
    proc.wait(timeout=10)
    raise AssertionError(f"the sandbox exited {proc.returncode}:\n{''.join(seen)}")


def _readme_cli(env: dict[str, str], *args: str, timeout: float = 400) -> str:
    run = subprocess.run(
        [IMAGECTL, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert run.returncode == 0, f"imagectl {' '.join(args)} exited {run.returncode}:\n" + (
        run.stdout[-3000:] + run.stderr[-3000:]
    )
    return run.stdout


def _client(service: str, endpoint: str, region: str) -> Any:
    import boto3

    return boto3.client(
        service,
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _images(endpoint: str, region: str) -> dict[str, str]:
    """Every AMI this account owns in ``region``: id -> state."""
    ec2 = _client("ec2", endpoint, region)
    return {i["ImageId"]: i["State"] for i in ec2.describe_images(Owners=["self"])["Images"]}


@pytest.mark.slow
def test_the_readme_sandbox_path_promotes_and_rolls_back(tmp_path: Path) -> None:
    """docs/sandbox.md, "Try the AWS path without an AWS account", step by step against its own
    sandbox server (a subprocess, plain moto with the sandbox's EC2 CopyImage): build,
    validate-image --sandbox, promote to every region of the stack, status, a second
    candidate the same way, then rollback. Every command exits 0; every region's "latest"
    SSM parameter names an AMI that exists and is available there; each promotion made
    exactly one copy per region. Before, promote ended partially_promoted ("the copy
    disappeared": the server dropped CopyImage's tags) and rollback exited 2."""
    require_tool("packer")
    from imagectl.stacks import load_resolved

    _, resolved = load_resolved(REPO / "images", "h100-training")
    aws = resolved.stack.clouds.aws
    regions = list(aws.regions)
    home = aws.build.region
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGECTL_", "AWS_"))}
    base_env.update(IMAGECTL_STATE_DIR=str(tmp_path / "state"), PYTHONUNBUFFERED="1")
    override = tmp_path / "sandbox-replay.yaml"
    sandbox = _sandbox(port, override, base_env)
    try:
        # docs/sandbox.md step 2: the other shell sources the sandbox's sandbox.env
        exported = (override.parent / "sandbox.env").read_text().split()
        assert exported[0] == "export"
        env = {**base_env, **dict(item.split("=", 1) for item in exported[1:])}
        assert env["IMAGECTL_AWS_ENDPOINT_URL"] == endpoint
        # docs/sandbox.md step 2: a local signing key (`attest --new-key`, the one command that
        # makes one), trusted through the state folder's settings (`--save-trust`): no
        # variable to export in every shell
        _readme_cli(env, "attest", "--new-key", "--save-trust")
        assert "IMAGECTL_ATTESTATION_TRUST" not in env
        promoted: list[dict[str, str]] = []  # per promotion: region -> replica
        amis: list[str] = []
        for _ in range(2):
            built = json.loads(
                _readme_cli(
                    env, "build", "--stack", "h100-training", "--cloud", "aws",
                    "--skip-provisioning", "--json",
                )
            )  # fmt: skip
            (image,) = built["images"]
            ami = image["image_id"]
            amis.append(ami)
            assert built["sbom"], built  # the sandbox's build records an SBOM (a stand-in)
            sbom = json.loads(Path(built["sbom"]).read_text())
            assert {"name": "imagectl:inventory-source", "value": SBOM_STAND_IN} in sbom[
                "metadata"
            ]["properties"]
            _readme_cli(
                env, "validate-image", ami, "--cloud", "aws", "--hosts", "2",
                "--inventory-override", str(override), "--sandbox",
            )  # fmt: skip
            result = json.loads(_readme_cli(env, "promote", ami, "--json"))
            assert result["state"] == "promoted", result
            replicas = {r: v["replica_id"] for r, v in result["regions"].items()}
            assert sorted(replicas) == sorted(regions) and replicas[home] == ami
            promoted.append(replicas)
            _readme_cli(env, "status")
        # docs/sandbox.md: the two builds' SBOMs compared, and the replicas named as copies
        compared = json.loads(_readme_cli(env, "diff", amis[0], amis[1], "--json"))
        assert compared, compared
        status = " ".join(_readme_cli(env, "status", "--stack", "h100-training").split())
        assert f"(copy of {amis[1]} in {home})" in status
        assert "p5.48xlarge missing" not in status
        rolled = json.loads(
            _readme_cli(env, "rollback", "--stack", "h100-training", "--cloud", "aws", "--json")
        )
        assert {r: m["to"] for r, m in rolled["moved"].items()} == promoted[0]
        for region in regions:
            ssm = _client("ssm", endpoint, region)
            latest = ssm.get_parameter(Name="/imagectl/h100-training/latest")["Parameter"]
            images = _images(endpoint, region)
            assert latest["Value"] == promoted[0][region]
            assert images.get(latest["Value"]) == "available", (region, latest, images)
            if region != home:  # one copy per promotion, none left by a retry
                assert sorted(images) == sorted(p[region] for p in promoted), (region, images)
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.communicate(timeout=30)


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
            preexec_fn=default_signals,
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
