"""A validation instance on Google Cloud is one Compute Engine accepts for its machine
series: the NIC type, a boot disk type the series offers and onHostMaintenance TERMINATE,
from ``pipeline/clouds/gcp/machine_families.yaml`` (each entry with its source), never the
API's defaults (VIRTIO_NET, pd-standard, MIGRATE), which the Compute fake refuses as
Compute does (``tests/fakes/gcp_compute.py``, ``machine_family_refusal``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagectl.clouds.gcp.launch import DATA, launch_settings, series_of
from imagectl.core.yamlfast import load_data
from tests.fakes.fixtures import CloudEnv, launch, placement
from tests.fakes.gcp_compute import FAKE_SERIES

pytest_plugins = ["tests.fakes.fixtures"]

ROOT = Path(__file__).resolve().parents[2]


def _stack_shapes() -> list[str]:
    shapes = set()
    for path in (ROOT / "images" / "stacks").glob("*.yaml"):
        gcp = (load_data(path).get("clouds") or {}).get("gcp") or {}
        shapes.update(gcp.get("validation_shapes") or [])
    return sorted(shapes)


def _launch(env: CloudEnv, shape: str) -> Any:
    return launch(env.provider(), env.seed_candidate(), shape, env.fake.zones[0],
                  ssh_public_key="ssh-ed25519 AAAA k", allowed_cidr="203.0.113.7/32")  # fmt: skip


@pytest.mark.parametrize("shape", ["a3-highgpu-8g", "a4-highgpu-8g", "g2-standard-4"])
def test_a_gpu_launch_carries_its_series_nic_disk_type_and_terminate(
    gcp_fake: Any, shape: str
) -> None:
    env = CloudEnv("gcp", gcp_fake)
    inst = _launch(env, shape)
    (sent,) = gcp_fake.calls("POST", "/instances$")
    body = sent.body
    assert [n["nicType"] for n in body["networkInterfaces"]] == ["GVNIC"]
    (disk,) = body["disks"]
    kind = disk["initializeParams"]["diskType"]
    assert kind == f"zones/{gcp_fake.zones[0]}/diskTypes/{launch_settings(shape).boot_disk_type}"
    assert kind.rsplit("/", 1)[-1] != "pd-standard"
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert inst.instance_id and (gcp_fake.zones[0], inst.instance_id) in gcp_fake.instances


def test_the_a3_launch_is_one_compute_would_refuse_without_the_data(gcp_fake: Any) -> None:
    """The fake refuses each API default the A3 series does not take (400, naming the field)."""
    import requests

    zone = gcp_fake.zones[0]
    url = f"{gcp_fake.endpoint}/compute/v1/projects/{gcp_fake.project}/zones/{zone}/instances"
    env = CloudEnv("gcp", gcp_fake)
    image = env.seed_candidate()
    good = {
        "name": "probe", "machineType": f"zones/{gcp_fake.zones[0]}/machineTypes/a3-highgpu-8g",
        "disks": [{"boot": True, "initializeParams": {
            "sourceImage": f"projects/{gcp_fake.project}/global/images/{image.image_id}",
            "diskType": "pd-balanced"}}],
        "networkInterfaces": [{"nicType": "GVNIC"}],
        "scheduling": {"onHostMaintenance": "TERMINATE"},
    }  # fmt: skip
    defaults = [
        ("networkInterfaces", [{}], "nicType"),
        ("disks", [{"boot": True, "initializeParams": {
            "sourceImage": good["disks"][0]["initializeParams"]["sourceImage"]}}], "diskType"),
        ("scheduling", {}, "onHostMaintenance"),
    ]  # fmt: skip
    for key, value, field in defaults:
        resp = requests.post(url, json={**good, key: value}, timeout=10)
        assert resp.status_code == 400 and field in resp.json()["error"]["message"], resp.text
    assert requests.post(url, json=good, timeout=10).status_code == 200


def test_a_series_without_data_keeps_the_api_defaults_and_terminate(gcp_fake: Any) -> None:
    env = CloudEnv("gcp", gcp_fake)
    _launch(env, "n2-standard-8")
    (sent,) = gcp_fake.calls("POST", "/instances$")
    assert "nicType" not in sent.body["networkInterfaces"][0]
    assert "diskType" not in sent.body["disks"][0]["initializeParams"]
    assert sent.body["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_every_validation_shape_of_the_stacks_has_launch_data_with_a_source() -> None:
    data = load_data(DATA)["series"]
    for shape in _stack_shapes():
        assert series_of(shape) in data, shape
    for name, entry in data.items():
        assert entry["source"] and entry["on_host_maintenance"] == "TERMINATE", name
        assert entry["boot_disk_types"], name
        if name in FAKE_SERIES:  # the shipped data asks for what the fake's documents admit
            assert entry["boot_disk_types"][0] in FAKE_SERIES[name]["boot"], name
            assert entry["nic_type"] == "GVNIC" or not FAKE_SERIES[name]["gvnic"], name


def test_a_multi_node_run_shares_one_rule_admitting_its_hosts_to_each_other(gcp_fake: Any) -> None:
    """The run's hosts reach each other (NCCL and its bootstrap) through one rule whose
    source and target are the run's network tag; nothing from outside the run, and SSH
    from the runner only; delete_placement removes it."""
    from tests.fakes.gcp_compute import firewall_admits

    env = CloudEnv("gcp", gcp_fake)
    provider = env.provider()
    image = env.seed_candidate()
    zone = gcp_fake.zones[0]
    run = placement(provider, image, "a3-highgpu-8g", zone)
    nodes = [
        launch(provider, image, "a3-highgpu-8g", zone, ssh_public_key="ssh-ed25519 AAAA k",
               allowed_cidr="203.0.113.7/32", placement=run)
        for _ in range(2)
    ]  # fmt: skip
    (peers,) = [f for f in gcp_fake.firewalls.values() if f["name"].endswith("-peers")]
    assert peers["sourceTags"] == [run.name] == peers["targetTags"]
    assert not peers.get("sourceRanges") and peers["allowed"] == [{"IPProtocol": "all"}]
    for node in nodes:
        raw = gcp_fake.instances[(zone, node.instance_id)]
        assert run.name in raw["tags"]["items"]
        rules = list(gcp_fake.firewalls.values())
        assert firewall_admits(rules, raw, "203.0.113.7")
        assert not firewall_admits(rules, raw, "198.51.100.9")  # the run's rule admits no outsider
    for node in nodes:
        provider.terminate(node)
    provider.delete_placement(run)
    assert [f for f in gcp_fake.firewalls.values() if f["name"].endswith("-peers")] == []
