"""A local AWS for trying imagectl without an account: a moto server, seeded.

    python -m imagectl.clouds.aws.sandbox --port 5000 --stack h100-training

starts moto's EC2/SSM server on 127.0.0.1:5000, registers the stack's Ubuntu base AMI
(as Canonical's, hvm, EBS-backed, so the Packer template's production filter finds it),
writes ``sandbox-replay.yaml`` (a test-mode inventory override: the "instances" are this
machine replaying a healthy NVML snapshot) and prints the environment to export. It
runs until Ctrl-C. Needs the dev extra (``moto[server]``). Nothing here is used by the
production code path; it only stands up the emulator the real clients then talk to.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from imagectl.paths import find_workspace
from imagectl.stacks import load_resolved

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
MOTO_ACCOUNT = "123456789012"


def seed_base_image(endpoint: str, resolved: object) -> str:
    """Register the stack's base AMI in the build region, as its real owner has it."""
    import boto3
    from moto.ec2.models import ec2_backends

    aws = resolved.stack.clouds.aws  # type: ignore[attr-defined]
    region = aws.build.region
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    name = aws.base_image.name.replace("*", "20261101")
    image_id = str(
        ec2.register_image(Name=name, Architecture="x86_64", RootDeviceName="/dev/sda1")["ImageId"]
    )
    record = ec2_backends[MOTO_ACCOUNT][region].amis[image_id]
    record.virtualization_type = "hvm"
    record.root_device_type = "ebs"
    record.owner_id = aws.base_image.owner
    return image_id


def write_override(path: Path, snapshot: Path, hygiene_root: Path) -> None:
    hygiene_root.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Test mode: every 'instance' is this machine (moto instances do not boot),\n"
        "# replaying a healthy H100 snapshot with the real validator.\n"
        "all:\n"
        "  ansible_connection: local\n"
        f"  validate_hygiene_root: {hygiene_root}\n"
        "default_slot:\n"
        f"  validate_snapshot: {snapshot}\n",
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--stack", default="h100-training")
    parser.add_argument("--override", type=Path, default=Path("sandbox-replay.yaml"))
    parser.add_argument(
        "--snapshot", type=Path, default=Path("tests/snapshots/healthy/h100-sxm-8x.json")
    )
    args = parser.parse_args(argv)
    os.environ.update(FAKE_ENV)
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
    from moto.server import ThreadedMotoServer

    _, resolved = load_resolved(find_workspace().images, args.stack)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{args.port}"
    base = seed_base_image(endpoint, resolved)
    write_override(
        args.override.resolve(),
        args.snapshot.resolve(),
        args.override.resolve().parent / "sandbox-empty-root",
    )
    print(f"moto server on {endpoint}; base AMI {base} seeded for {args.stack}", flush=True)
    print(
        "export "
        + " ".join(f"{k}={v}" for k, v in FAKE_ENV.items())
        + f" IMAGECTL_AWS_ENDPOINT_URL={endpoint} IMAGECTL_CLOUD_POLL_S=1",
        flush=True,
    )
    print(f"inventory override: {args.override.resolve()}", flush=True)
    stop = False

    def handler(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    while not stop:
        time.sleep(0.2)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
