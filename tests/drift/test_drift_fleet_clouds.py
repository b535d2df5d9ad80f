"""Fleet drift on AWS, Google Cloud and Azure at once, through the real providers against
moto and the GCP / Azure fakes (tests/fakes): per cloud, two instances run the image the
stack's pointer names and one runs an older candidate."""

from __future__ import annotations

import pytest
from drift_helpers import stack_report

from tests.fakes.fixtures import CloudEnv, launch

pytest_plugins = ["tests.fakes.fixtures"]
STACK = "h100-training"


def pointer_region(env: CloudEnv) -> str:
    clouds = env.resolved.stack.clouds
    return {"aws": clouds.aws.build.region, "gcp": "global",
            "azure": clouds.azure.build.location}[env.cloud]  # fmt: skip


@pytest.mark.slow  # three cloud SDKs and their emulators: about a minute
def test_stale_instances_on_every_cloud(cli, aws_moto, gcp_fake, azure_fake):
    expected = {}
    for cloud, fake in (("aws", aws_moto), ("gcp", gcp_fake), ("azure", azure_fake)):
        env = CloudEnv(cloud, fake)
        provider = env.provider()
        old, new = env.seed_candidate(), env.seed_candidate()
        region = pointer_region(env)
        provider.set_pointer(STACK, region, new.image_id)
        current = provider.get_image(provider.get_pointer(STACK, region), region) or new
        location = env.locations()[0]
        for image in (current, current, old):
            shape = env.resolved.stack.clouds.enabled()[cloud].validation_shapes[0]
            launch(provider, image, shape, location, stack=STACK)
        expected[cloud] = (current.image_id, old.image_id)

    result = cli("drift", "--stack", STACK, "--fleet", "--format", "json")
    assert result.code == 1, result.err
    findings = stack_report(result, STACK)["findings"]
    stale = {f["cloud"]: f for f in findings if f["kind"] == "fleet-stale"}
    summary = {f["cloud"]: f for f in findings if f["kind"] == "fleet-summary"}
    assert set(stale) == set(summary) == {"aws", "gcp", "azure"}
    for cloud, (current, old) in expected.items():
        assert summary[cloud]["extra"]["images"] == {current: 2, old: 1}, cloud
        assert stale[cloud]["extra"]["stale"] == 1
        assert (stale[cloud]["current"], stale[cloud]["available"]) == (current, old)
