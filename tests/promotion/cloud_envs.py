"""The h100-training stack on each cloud's emulator, ready to promote.

- AWS: a moto server (``ThreadedMotoServer``) on 127.0.0.1; the candidate AMI is
  registered in the build region (us-east-1). A region "fails" through an ``OptInRequired``
  error response injected at botocore's send step for ``CopyImage`` into it (what AWS
  answers for a region the account has not enabled); healing removes the hook.
- Google Cloud: ``tests.fakes.gcp_compute.FakeGcpCompute``; the candidate is a global
  image stored in ``us``; a failure is a 403 on image inserts.
- Azure: ``tests.fakes.azure_arm.FakeAzureArm``; the candidate is a gallery image version
  in eastus, excluded from latest; ``fail_replication(region)`` fails a target region.

Each ``CloudEnv`` gives the provider the promote command would build (through
``clouds.options.provider_options`` with the emulator's endpoint), a ``seed()`` that
records a validated candidate in the catalog, and ``copies(region)``.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from imagectl.provenance.attest import attest_image
from imagectl.tags import TAG_DIGEST, TAG_MANAGED, TAG_STACK
from tests.support import make_receipt

STACK = "h100-training"
_counter = itertools.count(1)


@dataclass
class CloudEnv:
    cloud: str
    resolved: Any
    endpoint: str
    catalog: Any
    source_region: str
    make_provider: Callable[[], Any]
    seed_cloud: Callable[[], str]  # creates a candidate, returns its cloud id
    count_copies: Callable[[str, str], int]  # (source cloud id, region) -> copies there
    fail: Callable[[str], None]
    heal: Callable[[str], None]
    env: dict[str, str] = field(default_factory=dict)  # for subprocesses
    # Google Cloud: members of the stack's image family made from a source image (the
    # family is the pointer, and a member is a copy); None on the other clouds.
    family_members: Callable[[str], int] | None = None
    fake: Any = None  # the Compute / ARM fake (None on AWS: moto)

    @property
    def regions(self) -> list[str]:
        return list(getattr(self.resolved.stack.clouds, self.cloud).regions)

    def provider(self) -> Any:
        return self.make_provider()

    def seed(self) -> Any:
        """A validated candidate: in the cloud, and in the catalog with a passing receipt."""
        from imagectl.catalog import repository as repo

        cloud_id = self.seed_cloud()
        digest = self.resolved.digest
        receipt = make_receipt(
            cloud_id,
            STACK,
            digest,
            profile="full",
            host="h-1",
            # every check the profile requires ran (validators/data/coverage.yaml)
            coverage={"profile": "full", "shape_kind": "nvswitch", "not_run": {}},
        )
        with self.catalog.transaction() as s:
            build = repo.record_build(
                s,
                build_id=f"b-{uuid.uuid4().hex[:8]}",
                stack=STACK,
                stack_digest=digest,
                cloud=self.cloud,
            )
            row = repo.record_image(
                s, build=build, cloud_image_id=cloud_id, region=self.source_region
            )
            repo.set_state(s, row, "validating", reason="test")
            # under the shape the stack validates on (the gate requires each of them)
            (shape,) = getattr(self.resolved.stack.clouds, self.cloud).validation_shapes
            repo.record_receipt(s, row, shape=shape, host="h-1", receipt=receipt)
            repo.set_state(s, row, "validated", reason="test")
        attest_image(self.catalog, row.id, self.provider())  # as the validation stage signs
        return row


def _tags(resolved: Any) -> dict[str, str]:
    return {TAG_MANAGED: "true", TAG_STACK: STACK, TAG_DIGEST: resolved.digest}


# -- AWS (moto) ---------------------------------------------------------------------------
FAKE_CREDS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
}


class _Raw:
    def __init__(self, body: bytes):
        self.body = body

    def stream(self, **_kw: Any) -> Any:
        yield self.body

    def read(self, *_a: Any) -> bytes:
        return self.body


def aws_env(resolved: Any, catalog: Any, endpoint: str) -> CloudEnv:
    import boto3
    from botocore.awsrequest import AWSResponse

    from imagectl.clouds.options import provider_options
    from imagectl.clouds.registry import cloud_spec, get_provider

    failing: set[str] = set()
    providers: list[Any] = []

    def opt_in_required(request: Any, **_kw: Any) -> Any:
        auth = request.headers.get("Authorization", b"")
        auth = auth.decode() if isinstance(auth, bytes) else auth
        for bad in failing:  # SigV4 names the region: Credential=KEY/DATE/REGION/ec2/...
            if f"/{bad}/ec2/" in auth:
                body = (
                    "<Response><Errors><Error><Code>OptInRequired</Code><Message>You are not "
                    f"subscribed to region {bad}.</Message></Error></Errors>"
                    "<RequestID>x</RequestID></Response>"
                ).encode()
                return AWSResponse(request.url, 401, {}, _Raw(body))
        return None

    def make_provider() -> Any:
        opts = provider_options(resolved, cloud_spec("aws"))
        provider = get_provider(
            cloud_spec("aws"),
            replace(opts, endpoint_url=endpoint, poll_interval_s=0.01, max_attempts=2),
        )
        for region in provider.regions:
            provider.clients.ec2(region).meta.events.register(
                "before-send.ec2.CopyImage", opt_in_required
            )
        providers.append(provider)
        return provider

    def ec2(region: str) -> Any:
        return boto3.client("ec2", region_name=region, endpoint_url=endpoint)

    def seed_cloud() -> str:
        client = ec2("us-east-1")
        volume = client.create_volume(AvailabilityZone="us-east-1a", Size=8)
        snap = client.create_snapshot(VolumeId=volume["VolumeId"])["SnapshotId"]
        name = f"imagectl-{STACK}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        ami = client.register_image(
            Name=name,
            RootDeviceName="/dev/sda1",
            Architecture="x86_64",
            BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"SnapshotId": snap}}],
        )["ImageId"]
        client.create_tags(
            Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in _tags(resolved).items()]
        )
        return str(ami)

    def count_copies(source: str, region: str) -> int:
        name = ec2("us-east-1").describe_images(ImageIds=[source])["Images"][0]["Name"]
        found = ec2(region).describe_images(
            Owners=["self"], Filters=[{"Name": "name", "Values": [name]}]
        )["Images"]
        return len(found)

    return CloudEnv(
        "aws",
        resolved,
        endpoint,
        catalog,
        "us-east-1",
        make_provider,
        seed_cloud,
        count_copies,
        failing.add,
        failing.discard,
        env={**FAKE_CREDS, "IMAGECTL_AWS_ENDPOINT_URL": endpoint, "IMAGECTL_CLOUD_POLL_S": "0.01"},
    )


# -- Google Cloud (local Compute REST fake) -------------------------------------------------
def gcp_env(resolved: Any, catalog: Any, fake: Any) -> CloudEnv:
    from imagectl.clouds.options import provider_options
    from imagectl.clouds.registry import cloud_spec, get_provider

    faults: dict[str, Any] = {}

    def make_provider() -> Any:
        opts = provider_options(resolved, cloud_spec("gcp"))
        return get_provider(
            cloud_spec("gcp"),
            replace(
                opts,
                project=fake.project,
                endpoint=fake.endpoint,
                poll_interval_s=0.01,
                retry_initial_s=0.01,
            ),
        )

    def seed_cloud() -> str:
        from imagectl.clouds.gcp.labels import to_labels

        name = f"cand-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        fake.add_image(name, labels=to_labels(_tags(resolved)), storage_locations=["us"])
        return name

    def count_copies(source: str, region: str) -> int:
        """Images other than the source holding its bits in ``region`` (the promoted
        image, in the family or not yet)."""
        return sum(
            1
            for img in list(fake.images.values())
            if region in img.get("storageLocations", [])
            and img["name"] != source
            and source[:20] in img["name"]
        )

    def fail(region: str) -> None:
        body = {"error": {"code": 403, "message": f"storage location {region} is not allowed"}}
        faults[region] = fake.add_fault(
            lambda r: (403, body, {}), method="POST", path="/global/images$", times=None
        )

    def heal(region: str) -> None:
        fault = faults.pop(region, None)
        if fault is not None:
            fault.times = 0

    return CloudEnv(
        "gcp",
        resolved,
        fake.endpoint,
        catalog,
        "global",
        make_provider,
        seed_cloud,
        count_copies,
        fail,
        heal,
        env={"IMAGECTL_GCP_ENDPOINT": fake.endpoint},
        fake=fake,
        family_members=lambda source: sum(
            1 for img in list(fake.images.values()) if img.get("family") and source in img["name"]
        ),
    )


# -- Azure (local ARM fake) --------------------------------------------------------------
def azure_env(resolved: Any, catalog: Any, fake: Any) -> CloudEnv:
    from imagectl.clouds.options import provider_options
    from imagectl.clouds.registry import cloud_spec, get_provider

    settings = resolved.stack.clouds.azure
    g = settings.gallery

    def make_provider() -> Any:
        opts = provider_options(resolved, cloud_spec("azure"))
        return get_provider(
            cloud_spec("azure"),
            replace(
                opts,
                subscription_id=fake.subscription,
                endpoint=fake.endpoint,
                polling_interval=0,
                poll_interval_s=0.01,
                retry_backoff_factor=0,
            ),
        )

    def seed_cloud() -> str:
        n = next(_counter)
        return str(
            fake.add_gallery_image_version(
                g.resource_group,
                g.name,
                g.image_definition,
                f"2026.1122.{n}",
                location=settings.build.location,
                tags=_tags(resolved),
                exclude_from_latest=True,
            )
        )

    def count_copies(source: str, region: str) -> int:
        key = source.lower()
        body = fake.resources.get(key) or {}
        targets = body.get("properties", {}).get("publishingProfile", {}).get("targetRegions", [])
        return sum(1 for t in targets if t["name"].replace(" ", "").lower() == region.lower())

    return CloudEnv(
        "azure",
        resolved,
        fake.endpoint,
        catalog,
        settings.build.location,
        make_provider,
        seed_cloud,
        count_copies,
        fake.fail_replication,
        fake.heal_replication,
        env={"IMAGECTL_AZURE_ENDPOINT": fake.endpoint},
        fake=fake,
    )
