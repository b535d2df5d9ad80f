"""pytest fixtures over the cloud fakes, and ``CloudEnv``: one API for all three clouds.

Enable in a test module with ``pytest_plugins = ["tests.fakes.fixtures"]`` (or import
the fixtures). Fixtures:

- ``aws_moto``: moto in process (``mock_aws``) with fake credentials, no default AMIs,
  and ``AwsFaults`` installed; yields the ``AwsFaults``.
- ``moto_server``: a ``ThreadedMotoServer`` on 127.0.0.1 (for subprocesses and Packer);
  yields its endpoint URL and exports ``IMAGECTL_AWS_ENDPOINT_URL``.
- ``gcp_fake``: a started ``FakeGcpCompute`` whose project is the stack's build project;
  ``IMAGECTL_GCP_ENDPOINT`` points at it.
- ``azure_fake``: a started ``FakeAzureArm`` for the stack's subscription;
  ``IMAGECTL_AZURE_ENDPOINT`` points at it.
- ``cloud_env`` (parametrised over aws / gcp / azure): a ``CloudEnv``.

Helpers:

- ``fake_aws_credentials(monkeypatch)``: moto's fake credentials, no default AMIs.
- ``moto_serving()``: a ``ThreadedMotoServer`` on 127.0.0.1 for a ``with`` block; yields
  its endpoint URL. ``register_base_ami(endpoint, region, name, owner)``: a publisher's
  base AMI on it.
- ``gcp_serving`` / ``azure_serving``: the GCP and ARM fakes for a ``with`` block.
- ``launch(provider, image, shape, location, **fields)``: a launch as a test run makes one;
  ``placement(provider, image, shape, location)``: a two-host run's placement.

``CloudEnv`` (what promotion / drift tests need without caring which cloud):
  ``provider()`` the real provider for the stack, talking to the fake;
  ``provider_with({"dotted.path": value})`` the same with fields of the stack's section
  for this cloud changed;
  ``seed_candidate(name=None, tags=None) -> CloudImage`` a candidate image of the stack;
  ``locations()`` the launch locations in the order the provider tries them;
  ``throttle(n)``, ``capacity_error(location)``, ``quota_error()``, ``never_running()``;
  ``throttled()`` how many throttling answers the fake gave;
  ``live_instances()`` ids of managed instances still alive.
Every provider polls with interval 0 (``IMAGECTL_CLOUD_POLL_S=0``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from imagectl.clouds.base import LaunchRequest
from tests.fakes import moto_extensions
from tests.fakes.aws_faults import AwsFaults
from tests.fakes.azure_arm import FakeAzureArm
from tests.fakes.gcp_compute import FakeGcpCompute

STACK = "h100-training"
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
}


def resolved_stack(name: str = STACK) -> Any:
    from imagectl.paths import find_workspace
    from imagectl.stacks import load_resolved

    return load_resolved(find_workspace().images, name)[1]


@pytest.fixture
def fast_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_CLOUD_POLL_S", "0")


def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's fake credentials and region in the environment, and no default AMIs."""
    for key, value in FAKE_AWS.items():
        monkeypatch.setenv(key, value)


@contextlib.contextmanager
def moto_serving() -> Iterator[str]:
    """A ``ThreadedMotoServer`` on 127.0.0.1 for the block; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


MOTO_ACCOUNT = "123456789012"  # the account moto answers for


def register_base_ami(endpoint: str, region: str, name: str, owner: str = MOTO_ACCOUNT) -> str:
    """A publisher's base AMI as the stack's owner and name filter find it, on the moto
    server at ``endpoint`` (running in this process); returns its id.

    moto's RegisterImage makes the caller the owner and drops the architecture, the
    virtualization type and the root device type: they are set on moto's record as a real
    Ubuntu AMI has them (x86_64, hvm, ebs, ``owner``'s account), so the production query
    (``AwsProvider.newest_base_image``) applies unchanged.
    """
    import boto3
    from moto.ec2.models import ec2_backends

    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    resp = ec2.register_image(
        Name=name,
        Architecture="x86_64",
        RootDeviceName="/dev/sda1",
        VirtualizationType="hvm",
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 8}}],
    )
    ami = ec2_backends[MOTO_ACCOUNT][region].amis[resp["ImageId"]]
    ami.virtualization_type = "hvm"
    ami.root_device_type = "ebs"
    ami.architecture = "x86_64"
    ami.owner_id = owner
    return str(resp["ImageId"])


def launch(provider: Any, image: Any, shape: str, location: str, **fields: Any) -> Any:
    """``provider.launch`` of a request as a test run makes one: an hour to live, launched
    by "test", for the stack; ``fields``: other ``LaunchRequest`` fields, or these changed."""
    fields = {"ttl": dt.timedelta(hours=1), "launched_by": "test", "stack": STACK, **fields}
    return provider.launch(LaunchRequest(image, shape, location=location, **fields))


def placement(
    provider: Any,
    image: Any,
    shape: str,
    location: str,
    *,
    name: str | None = None,
    ttl: dt.timedelta = dt.timedelta(hours=1),
    launched_by: str = "test",
) -> Any:
    """A two-host multi-node run's placement, tagged as the run tags its instances (the
    stack, ``image``, ``ttl``, ``launched_by``); named as a run names it unless ``name``."""
    from imagectl.clouds.common import instance_tags
    from imagectl.validation.fabric.nodes import placement_name

    tags = instance_tags(stack=STACK, image_id=image.image_id, ttl=ttl, launched_by=launched_by)
    return provider.create_placement(
        name=name or placement_name(STACK), location=location, shape=shape, count=2, tags=tags
    )


@pytest.fixture
def aws_moto(monkeypatch: pytest.MonkeyPatch, fast_polling: None) -> Iterator[AwsFaults]:
    fake_aws_credentials(monkeypatch)
    for key in ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    from moto import mock_aws

    moto_extensions.install()
    moto_extensions.BEHAVIOUR.reset()
    with mock_aws(), AwsFaults() as faults:
        yield faults


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch, fast_polling: None) -> Iterator[str]:
    fake_aws_credentials(monkeypatch)
    moto_extensions.install()
    moto_extensions.BEHAVIOUR.reset()
    with moto_serving() as endpoint:
        monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", endpoint)
        yield endpoint


@contextlib.contextmanager
def gcp_serving(monkeypatch: pytest.MonkeyPatch, guests: Any = None) -> Iterator[FakeGcpCompute]:
    """The Compute fake for the stack's build project (its region's zones a-c), started,
    with ``IMAGECTL_GCP_ENDPOINT`` naming it; ``guests``: a GuestHost to boot instances."""
    gcp = resolved_stack().stack.clouds.gcp
    region = gcp.build.zone.rsplit("-", 1)[0]
    zones = tuple(f"{region}-{z}" for z in "abc")
    with FakeGcpCompute(project=gcp.build.project, zones=zones, guests=guests) as fake:
        monkeypatch.setenv("IMAGECTL_GCP_ENDPOINT", fake.endpoint)
        yield fake


@contextlib.contextmanager
def azure_serving(monkeypatch: pytest.MonkeyPatch, guests: Any = None) -> Iterator[FakeAzureArm]:
    """The ARM fake for the stack's subscription, started, with ``IMAGECTL_AZURE_ENDPOINT``
    naming it; ``guests``: a GuestHost to boot VMs."""
    subscription = resolved_stack().stack.clouds.azure.build.subscription_id
    with FakeAzureArm(subscription=subscription, guests=guests) as fake:
        monkeypatch.setenv("IMAGECTL_AZURE_ENDPOINT", fake.endpoint)
        yield fake


@pytest.fixture
def gcp_fake(monkeypatch: pytest.MonkeyPatch, fast_polling: None) -> Iterator[FakeGcpCompute]:
    with gcp_serving(monkeypatch) as fake:
        yield fake


@pytest.fixture
def azure_fake(monkeypatch: pytest.MonkeyPatch, fast_polling: None) -> Iterator[FakeAzureArm]:
    with azure_serving(monkeypatch) as fake:
        yield fake


@dataclass
class CloudEnv:
    cloud: str
    fake: Any
    resolved: Any = field(default_factory=resolved_stack)
    _count: int = 0

    def provider(self) -> Any:
        from imagectl.clouds.options import provider_options
        from imagectl.clouds.registry import cloud_spec, get_provider

        return get_provider(
            cloud_spec(self.cloud), provider_options(self.resolved, cloud_spec(self.cloud))
        )

    def provider_with(self, changes: dict[str, Any]) -> Any:
        """The real provider for the stack with fields of its section for this cloud
        replaced, each named by its dotted path in it (``"gallery.security_type"``)."""
        from imagectl.clouds.options import provider_options
        from imagectl.clouds.registry import cloud_spec, get_provider
        from imagectl.stacks.schema import Stack

        raw = self.resolved.stack.model_dump(mode="json")
        for path, value in changes.items():
            *parents, name = path.split(".")
            section = raw["clouds"][self.cloud]
            for parent in parents:
                section = section[parent]
            section[name] = value
        stack = Stack.model_validate(raw)
        spec = cloud_spec(self.cloud)
        return get_provider(spec, provider_options(SimpleNamespace(stack=stack, name="s"), spec))

    def tags(self) -> dict[str, str]:
        return {"imagectl:stack": self.resolved.name, "imagectl:stack-digest": self.resolved.digest}

    def seed_candidate(self, name: str | None = None, tags: dict[str, str] | None = None) -> Any:
        self._count += 1
        name = name or f"imagectl-{self.resolved.name}-cand{self._count}"
        all_tags = {**self.tags(), **(tags or {})}
        if self.cloud == "aws":
            import boto3

            region = self.resolved.stack.clouds.aws.build.region
            ec2 = boto3.client("ec2", region_name=region)
            image_id = ec2.register_image(
                Name=name,
                RootDeviceName="/dev/sda1",
                BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 8}}],
            )["ImageId"]
            ec2.create_tags(
                Resources=[image_id], Tags=[{"Key": k, "Value": v} for k, v in all_tags.items()]
            )
            image = self.provider().get_image(image_id, region)
        elif self.cloud == "gcp":
            from imagectl.clouds.gcp.labels import to_labels

            self.fake.add_image(name, labels=to_labels(all_tags))
            image = self.provider().get_image(name, "")
        else:
            az = self.resolved.stack.clouds.azure
            version = f"2026.1122.{self._count}"
            vid = self.fake.add_gallery_image_version(
                az.gallery.resource_group,
                az.gallery.name,
                az.gallery.image_definition,
                version,
                location=az.build.location,
                tags=all_tags,
                exclude_from_latest=True,
            )
            image = self.provider().get_image(vid, az.build.location)
        assert image is not None
        return image

    def locations(self) -> list[str]:
        image = self.seed_candidate() if self.cloud == "aws" else None
        provider = self.provider()
        if self.cloud == "aws":
            return list(provider.candidate_locations(image))
        if self.cloud == "gcp":
            return list(provider.candidate_locations(None))
        loc = self.resolved.stack.clouds.azure.build.location
        return [f"{loc}/{z}" for z in provider.zones]

    def throttle(self, times: int = 2) -> None:
        if self.cloud == "aws":
            self.fake.throttle(times)
        elif self.cloud == "gcp":
            self.fake.throttle(times, method="POST", path="/instances$")
        else:
            self.fake.throttle(times, method="PUT", path="/virtualMachines/")

    def throttled(self) -> int:
        if self.cloud == "aws":
            return sum(1 for f in self.fake.faults_raised if "RequestLimitExceeded" in f)
        return sum(1 for r in self.fake.requests if r.status == 429)

    def capacity_error(self, location: str) -> None:
        if self.cloud == "azure":
            region, _, zone = location.partition("/")
            self.fake.capacity_error(region, zone=zone or None)
        else:
            self.fake.capacity_error(location)

    def quota_error(self) -> None:
        self.fake.quota_error()

    def never_running(self) -> None:
        self.fake.never_running()

    def live_instances(self) -> list[str]:
        return sorted(i.instance_id for i in self.provider().list_instances(managed_only=True))


@pytest.fixture(params=["aws", "gcp", "azure"])
def cloud_env(request: pytest.FixtureRequest) -> CloudEnv:
    fixture = {"aws": "aws_moto", "gcp": "gcp_fake", "azure": "azure_fake"}[request.param]
    return CloudEnv(request.param, request.getfixturevalue(fixture))
