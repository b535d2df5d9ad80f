"""Fleet drift on AWS through the real provider (boto3) against a local moto server.

Instances run in two of the stack's regions; the stack's "latest" pointer is its SSM
parameter per region. Clouds other than AWS are removed from a copy of the stack.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drift_helpers import stack_report
from ruamel.yaml import YAML

from tests.fakes.fixtures import fake_aws_credentials, moto_serving


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    fake_aws_credentials(monkeypatch)
    with moto_serving() as endpoint:
        monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", endpoint)
        yield endpoint


def aws_only(ws: Path) -> None:
    path = ws / "images" / "stacks" / "h100-training.yaml"
    yaml = YAML(typ="rt")
    doc = yaml.load(path.read_text())
    del doc["clouds"]["gcp"], doc["clouds"]["azure"], doc["network"]["infiniband"]
    with path.open("w") as fh:
        yaml.dump(doc, fh)


def client(endpoint: str, service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region, endpoint_url=endpoint)


def amis(endpoint: str, region: str) -> list[str]:
    """Two images of the stack in ``region``: the current one and an older one."""
    ec2 = client(endpoint, "ec2", region)
    return [
        ec2.register_image(Name=f"h100-training-{n}", RootDeviceName="/dev/sda1")["ImageId"]
        for n in ("new", "old")
    ]


def run(endpoint: str, region: str, ami: str, n: int, stack: str | None) -> None:
    tags = [{"ResourceType": "instance",
             "Tags": [{"Key": "imagectl:stack", "Value": stack}]}] if stack else []  # fmt: skip
    client(endpoint, "ec2", region).run_instances(
        ImageId=ami, MinCount=n, MaxCount=n, InstanceType="p5.48xlarge", TagSpecifications=tags
    )


@pytest.mark.slow  # moto EC2 + SSM in five regions
def test_instances_not_on_the_pointed_image(cli, moto, workspace_copy):
    aws_only(workspace_copy)
    east_new, east_old = amis(moto, "us-east-1")
    west_new, west_old = amis(moto, "us-west-2")
    for region, ami in (("us-east-1", east_new), ("us-west-2", west_new)):
        client(moto, "ssm", region).put_parameter(
            Name="/imagectl/h100-training/latest", Value=ami, Type="String", Overwrite=True
        )
    run(moto, "us-east-1", east_new, 2, "h100-training")
    run(moto, "us-east-1", east_old, 1, "h100-training")
    run(moto, "us-east-1", east_old, 4, None)  # not imagectl's: ignored
    run(moto, "us-west-2", west_old, 1, "h100-training")
    result = cli(
        "--root",
        str(workspace_copy),
        "drift",
        "--stack",
        "h100-training",
        "--fleet",
        "--format",
        "json",
    )
    assert result.code == 1, result.err
    entry = stack_report(result, "h100-training")
    summary = {f["region"]: f["extra"] for f in entry["findings"] if f["kind"] == "fleet-summary"}
    assert summary == {
        "us-east-1": {"images": {east_new: 2, east_old: 1}, "total": 3},
        "us-west-2": {"images": {west_old: 1}, "total": 1},
    }
    stale = {f["region"]: f for f in entry["findings"] if f["kind"] == "fleet-stale"}
    assert stale["us-east-1"]["extra"]["stale"] == 1
    assert stale["us-west-2"]["current"] == west_new


def test_cloud_refusing_the_credentials_is_an_error_of_the_check(cli, workspace_copy, monkeypatch):
    """EC2 answers 401 AuthFailure (an expired role session): the fleet check of that cloud
    could not run, an error in the report naming the cloud (exit 1, never empty output)."""
    import http.server
    import threading

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = (
                b'<?xml version="1.0"?><Response><Errors><Error><Code>AuthFailure</Code>'
                b"<Message>AWS was not able to validate the provided access credentials"
                b"</Message></Error></Errors><RequestID>1</RequestID></Response>"
            )
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    aws_only(workspace_copy)
    fake_aws_credentials(monkeypatch)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_port}")
    try:
        result = cli(
            "--root", str(workspace_copy), "drift", "--stack", "h100-training", "--fleet", "--json"
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.code == 1
    (error,) = result.json()["stacks"][0]["errors"]
    assert error["source"] == "fleet" and error["cloud"] == "aws" and error["kind"] == "refused"
    assert "aws: cannot list instances" in error["message"] and "AuthFailure" in error["message"]
