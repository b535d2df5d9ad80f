"""A local AWS for trying imagectl without an account: a moto server, seeded.

    python -m imagectl.clouds.aws.sandbox --stack h100-training [--port P]

starts moto's EC2/SSM server on 127.0.0.1 (on a free port it picks and prints, unless
``--port`` names one; a port in use is exit 2 at once, naming it: 5000, the port moto
documents, is macOS's AirPlay Receiver), registers the stack's Ubuntu base AMI
(as Canonical's, hvm, EBS-backed, so the Packer template's production filter finds it),
writes ``sandbox-replay.yaml`` (a test-mode inventory override: the "instances" are this
machine replaying a healthy NVML snapshot) into the state folder (``sandbox/``; nothing
into the checkout) and prints its path and the environment to export, which it also
writes to ``sandbox/sandbox.env`` for another shell to source. It
runs until Ctrl-C. Needs the dev extra (``moto[server]``). Nothing here is used by the
production code path; it only stands up the emulator the real clients then talk to.

moto (5.2.5) answers ``CopyImage`` with a new AMI on every call and drops its
``ClientToken`` and ``TagSpecifications``; EC2 does neither, and imagectl's promotion
relies on both. ``emulate_copy_image()`` makes the server's ``CopyImage`` what the EC2
API reference documents, at moto's protocol layer:

- ``ClientToken`` ("Unique, case-sensitive identifier you provide to ensure idempotency
  of the request", EC2 API reference, "Ensuring idempotency in Amazon EC2 API
  requests"): the same token with the same parameters returns the same ``ImageId``; the
  same token with other parameters is ``IdempotentParameterMismatch``.
- ``TagSpecifications`` ("The tags to apply to the new AMI and new snapshots [...] If
  you specify other values for ``ResourceType``, the request fails"): ``image`` and
  ``snapshot`` tags are applied with the copy; any other type is
  ``InvalidParameterValue``.
- The copy is ``pending`` until ``COPY_PENDING_POLLS`` ``DescribeImages`` calls in its
  region have seen it, then ``available`` (a copy is asynchronous on EC2).
- ``Image.SourceImageId`` / ``SourceImageRegion`` are returned for the copy and the
  ``source-image-id`` / ``source-image-region`` filters of ``DescribeImages`` match
  them (EC2 API reference, DescribeImages).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from imagectl.clouds.aws import sandbox_doctor
from imagectl.paths import find_workspace, state_dir
from imagectl.stacks import load_resolved

if TYPE_CHECKING:
    from moto.ec2.models import EC2Backend
    from moto.ec2.models.amis import Ami

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
MOTO_ACCOUNT = "123456789012"
COPY_PENDING_POLLS = 2  # DescribeImages calls in its region before a copy is available
COPY_RESOURCE_TYPES = ("image", "snapshot")


def add_source_image_filters() -> None:
    """moto's AMIs answer the ``source-image-id`` / ``source-image-region`` filters of
    ``DescribeImages`` from the ``source_image_id`` / ``source_image_region`` a copy
    records (idempotent)."""
    from moto.ec2.models.amis import Ami

    if getattr(Ami, "_imagectl_source_filters", False):
        return
    original = Ami.get_filter_value

    def get_filter_value(self: Ami, filter_name: str, method_name: str | None = None) -> object:
        if filter_name == "source-image-id":
            return getattr(self, "source_image_id", None)
        if filter_name == "source-image-region":
            return getattr(self, "source_image_region", None)
        return original(self, filter_name, method_name)

    Ami.get_filter_value = get_filter_value  # type: ignore[method-assign]
    Ami._imagectl_source_filters = True  # type: ignore[attr-defined]


def copy_tags(specs: list[dict[str, object]]) -> dict[str, dict[str, str]]:
    """``TagSpecifications`` of a ``CopyImage`` -> resource type -> tags; a type other
    than ``image`` / ``snapshot`` fails the request, as on EC2."""
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.utils import convert_tag_spec

    for spec in specs:
        if spec.get("ResourceType") not in COPY_RESOURCE_TYPES:
            raise EC2ClientError(
                "InvalidParameterValue",
                f"'{spec.get('ResourceType')}' is not a valid taggable resource type for "
                "this operation (CopyImage tags an image and its snapshots).",
            )
    return convert_tag_spec(specs) if specs else {}


def copied_before(
    tokens: dict[tuple[str, str, str], tuple[str, tuple[object, ...]]],
    key: tuple[str, str, str],
    signature: tuple[object, ...],
) -> str | None:
    """The AMI an earlier ``CopyImage`` with this ``ClientToken`` (``key``'s last part)
    made, as EC2's idempotency returns it; ``IdempotentParameterMismatch`` when that
    request had other parameters; ``None`` for a new request. Called under the lock."""
    from moto.ec2.exceptions import EC2ClientError

    if not key[2] or key not in tokens:
        return None
    ami_id, seen = tokens[key]
    if seen != signature:
        raise EC2ClientError(
            "IdempotentParameterMismatch",
            "The client token you have provided is associated with a resource "
            "that is already deleted or was created with different parameters.",
        )
    return ami_id


def new_copy(
    backend: EC2Backend,
    source_id: str,
    source_region: str,
    name: str,
    description: str,
    tags: dict[str, dict[str, str]],
) -> Ami:
    """moto's copy, with what EC2 records of it: the source image and region (the
    ``source-image-*`` filters) and the request's tags on the image and its snapshot."""
    ami = backend.copy_image(source_id, source_region, name, description)
    # attributes moto's Ami does not declare, read back by get_filter_value's getattr
    vars(ami).update(source_image_id=source_id, source_image_region=source_region)
    if tags.get("image"):
        backend.create_tags([ami.id], tags["image"])
    if tags.get("snapshot"):
        backend.create_tags([ami.ebs_snapshot.id], tags["snapshot"])
    return ami


def emulate_copy_image() -> None:
    """Replace moto's ``CopyImage`` and ``DescribeImages`` answers with EC2's documented
    behaviour (module docstring); idempotent."""
    from moto.core.responses import ActionResult
    from moto.ec2.responses.amis import AmisResponse

    if getattr(AmisResponse, "_imagectl_sandbox", False):
        return
    add_source_image_filters()
    lock = threading.Lock()
    tokens: dict[tuple[str, str, str], tuple[str, tuple[object, ...]]] = {}
    pending: dict[tuple[str, str, str], int] = {}
    original_describe = AmisResponse.describe_images

    def copy_image(self: AmisResponse) -> ActionResult:
        backend = self.ec2_backend
        source_id = self._get_param("SourceImageId")
        source_region = self._get_param("SourceRegion")
        name = self._get_param("Name")
        description = self._get_param("Description")
        token = self._get_param("ClientToken")
        tags = copy_tags(self._get_param("TagSpecifications", []) or [])
        signature = (
            source_id,
            source_region,
            name,
            description,
            self._get_param("Encrypted"),
            self._get_param("KmsKeyId"),
        )
        self.error_on_dryrun()
        with lock:
            key = (backend.account_id, backend.region_name, token or "")
            earlier = copied_before(tokens, key, signature)
            if earlier:
                return ActionResult({"ImageId": earlier})
            ami = new_copy(backend, source_id, source_region, name, description, tags)
            if COPY_PENDING_POLLS > 0:
                ami.state = "pending"
                pending[(backend.account_id, backend.region_name, ami.id)] = COPY_PENDING_POLLS
            if token:
                tokens[key] = (ami.id, signature)
        return ActionResult({"ImageId": ami.id})

    def describe_images(self: AmisResponse) -> ActionResult:
        backend = self.ec2_backend
        with lock:
            for key, left in list(pending.items()):
                if key[:2] != (backend.account_id, backend.region_name):
                    continue
                ami = backend.amis.get(key[2])
                if ami is None or left <= 1:
                    pending.pop(key)
                    if ami is not None:
                        ami.state = "available"
                else:
                    pending[key] = left - 1
        return original_describe(self)

    AmisResponse.copy_image = copy_image  # type: ignore[method-assign]
    AmisResponse.describe_images = describe_images  # type: ignore[method-assign]
    AmisResponse._imagectl_sandbox = True  # type: ignore[attr-defined]


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
    record.architecture = "x86_64"  # moto's RegisterImage drops it
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


def bind_check(port: int) -> str | None:
    """Why ``port`` on 127.0.0.1 cannot be served (None: it can). Checked before moto's
    server thread starts: a server thread that cannot bind dies alone and the sandbox
    would wait forever."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help="Port on 127.0.0.1 (default: a free one, printed). A port in use is exit 2.",
    )
    parser.add_argument("--stack", default="h100-training")
    parser.add_argument(
        "--override",
        type=Path,
        default=None,
        help="Where to write the inventory override (default: the state folder's "
        "sandbox/sandbox-replay.yaml; nothing is written into the checkout).",
    )
    parser.add_argument(
        "--snapshot",
        type=Path,
        default=None,
        help="The NVML snapshot the 'instances' replay (default: the checkout's "
        "tests/snapshots/healthy/h100-sxm-8x.json).",
    )
    args = parser.parse_args(argv)
    port = args.port or free_port()
    busy = bind_check(port)
    if busy:
        print(
            f"sandbox: port {port} on 127.0.0.1 cannot be used ({busy}): another program "
            "listens there (on macOS, AirPlay Receiver takes 5000 and 7000). Leave --port "
            "out and the sandbox picks a free port and prints it, or pass another --port.",
            file=sys.stderr,
        )
        return 2
    workspace = find_workspace()
    override = args.override or state_dir() / "sandbox" / "sandbox-replay.yaml"
    snapshot = args.snapshot or workspace.root / "tests/snapshots/healthy/h100-sxm-8x.json"
    os.environ.update(FAKE_ENV)
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
    from moto.server import ThreadedMotoServer

    emulate_copy_image()
    sandbox_doctor.install()  # IAM simulation, EC2 quotas, the default EBS key
    _, resolved = load_resolved(workspace.images, args.stack)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    base = seed_base_image(endpoint, resolved)
    override = override.resolve()
    override.parent.mkdir(parents=True, exist_ok=True)
    write_override(override, snapshot.resolve(), override.parent / "sandbox-empty-root")
    print(f"moto server on {endpoint} (port {port}); base AMI {base} seeded for {args.stack}",
          flush=True)  # fmt: skip
    # the other terminal runs as an identity holding exactly the shipped build and
    # validate documents (what the build workflow's job holds), so `imagectl doctor`
    # checks them as it would on an account
    identity = sandbox_doctor.sandbox_identity(endpoint, workspace.images, ("build", "validate"))
    exports = (
        "export "
        + " ".join(f"{k}={v}" for k, v in {**FAKE_ENV, **identity}.items())
        + f" IMAGECTL_AWS_ENDPOINT_URL={endpoint} IMAGECTL_CLOUD_POLL_S=1"
    )
    env_file = override.parent / "sandbox.env"
    env_file.write_text(exports + "\n", encoding="utf-8")
    print(exports, flush=True)
    print(f"environment for another shell: . {env_file}", flush=True)
    print(f"inventory override: {override}", flush=True)
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
