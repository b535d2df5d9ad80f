"""``imagectl validate-image --nodes 2`` on each cloud's protocol fake, without a VM.

The providers' real SDK clients create the cloud's placement (AWS cluster placement group
on moto, GCP compact placement policy and Azure proximity placement group on the fakes,
which check them as the APIs document), launch both nodes in it, and delete it after the
nodes are terminated. Each node is this machine (the test-mode inventory override) and
replays a healthy snapshot alone; then playbooks/fabric.yml runs ``imagectl collectives``
on both "nodes" at once, at 127.0.0.1 and 127.0.0.2, and torch.distributed's gloo really
runs the all_reduce across them (the override's ``fabric_device: cpu``). The fabric
receipt goes into the catalog beside the nodes' receipts, and the gate requires it where
the stack's ``validation.nodes`` is 2. The run holds exactly the validate permission
document (images/permissions/<cloud>/validate.*, enforced as in
tests/clouds/test_validate_reap_permissions.py), placement included.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.clouds.scenario import HEALTHY, write_override
from tests.fakes import permissions as perm
from tests.fakes.fixtures import CloudEnv

if importlib.util.find_spec("torch") is None:  # found, not imported: collecting stays cheap
    pytest.skip("torch is not installed", allow_module_level=True)


def _override(tmp_path: Path, cloud: str) -> Path:
    path = write_override(tmp_path, [HEALTHY, HEALTHY], cloud=cloud)
    data = YAML(typ="safe").load(path.read_text())
    data["all"].update(fabric_device="cpu", fabric_max_bytes=65536)
    for slot, address in zip(data["slots"], ("127.0.0.1", "127.0.0.2"), strict=True):
        slot["fabric_address"] = address
    with path.open("w") as fh:
        YAML().dump(data, fh)
    return path


def _rows(cloud: str, image_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    with open_catalog().transaction() as s:
        (img,) = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        return [(run.host, run.verdict, dict(run.receipt)) for run in repo.receipts(s, img)]


def _gate(cloud: str, image_id: str, nodes: int) -> list[str]:
    """The gate's refusals about the nodes and the fabric receipt (the replayed hosts'
    receipts are refused on their own rule, which these tests do not judge)."""
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog
    from imagectl.promotion.gate import check_gate

    with open_catalog().transaction() as s:
        (img,) = [r for r in repo.list_images(s, cloud=cloud) if r.cloud_image_id == image_id]
        reasons = check_gate(s, img, stack_digest=img.stack_digest, max_age_hours=24,
                             required_nodes=nodes)  # fmt: skip
    return [r for r in reasons if "multi-node" in r or " on fabric)" in r]


def _placement_calls(env: CloudEnv) -> list[str]:
    if env.cloud == "aws":
        return []  # moto: asserted on the backend below
    wanted = {"gcp": "resourcePolicies", "azure": "proximityPlacementGroups"}[env.cloud]
    return [f"{r.method} {r.status}" for r in env.fake.requests if wanted in r.path]


def test_two_nodes_in_the_clouds_placement_run_collectives_and_record_the_fabric(
    cli: Any, cloud_env: CloudEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = cloud_env.seed_candidate()
    validate = perm.load_document(cloud_env.cloud, "validate")
    with perm.enforced(cloud_env.cloud, cloud_env.fake, monkeypatch, validate) as enforcer:
        result = cli(
            "validate-image", image.image_id, "--cloud", cloud_env.cloud, "--stack",
            "h100-training", "--inventory-override", str(_override(tmp_path, cloud_env.cloud)),
            "--reach-timeout", "2", "--nodes", "2", "--json", "--receipts-dir",
            str(tmp_path / "r"), "--runner-cidr", "203.0.113.7/32",
        )  # fmt: skip
    assert enforcer.refused == [] and enforcer.unknown == [], (enforcer.refused, enforcer.unknown)
    data = result.json()
    assert data["state"] == "validated", (data["reasons"], data.get("fabric"))
    assert result.code == 0, result.err
    assert len(data["launched"]) == 2 and [h["verdict"] for h in data["hosts"]] == ["pass"] * 2
    (placement,) = data["placements"]
    kind = {"aws": "cluster placement group", "gcp": "compact placement policy",
            "azure": "proximity placement group"}[cloud_env.cloud]  # fmt: skip
    assert placement["kind"] == kind
    # the fabric result: exact values across the two nodes over gloo, no floor on cpu
    (fabric,) = data["fabric"].values()
    assert fabric["verdict"] == "pass"
    assert fabric["checks"]["fabric.collective.all_reduce"]["outcome"] == "pass"
    assert fabric["checks"]["fabric.attribution"]["measured"] == "pass"
    assert [n["address"] for n in fabric["nodes"]] == ["127.0.0.1", "127.0.0.2"]
    # one receipt per node plus the fabric receipt, bound to the image and digest
    rows = _rows(cloud_env.cloud, image.image_id)
    assert sorted(h for h, _, _ in rows if h != "fabric") == sorted(
        i["instance_id"] for i in data["launched"]
    )
    (body,) = [b for h, _, b in rows if h == "fabric"]
    assert body["host"]["role"] == "fabric" and body["expectations"]["nodes"] == 2
    assert body["host"]["placement"]["name"] == placement["name"]
    assert body["host"]["nccl_env"]["GLOO_SOCKET_IFNAME"] == "lo"  # 127.0.0.1's interface
    assert body["image_id"] == image.image_id and body["stack_digest"] == cloud_env.resolved.digest
    assert _gate(cloud_env.cloud, image.image_id, 2) == []
    # created before the launches, named by them, deleted after the terminations
    if cloud_env.cloud == "aws":
        from tests.fakes.moto_extensions import BEHAVIOUR

        assert [k[2] for k in BEHAVIOUR.placed.values()] == [placement["name"]] * 2
        assert all(k[2] != placement["name"] for k in BEHAVIOUR.placement_groups)
    else:
        calls = _placement_calls(cloud_env)
        assert calls[0].startswith("POST" if cloud_env.cloud == "gcp" else "PUT")
        assert calls[-1].startswith("DELETE") and calls[-1].split()[1] in ("200",)
    assert cloud_env.live_instances() == []


def test_the_gate_refuses_a_two_node_stack_without_the_fabric_receipt(
    cli: Any, gcp_fake: Any, tmp_path: Path
) -> None:
    env = CloudEnv("gcp", gcp_fake)
    image = env.seed_candidate()
    override = write_override(tmp_path, [HEALTHY, HEALTHY], cloud="gcp")
    result = cli(
        "validate-image", image.image_id, "--cloud", "gcp", "--stack", "h100-training",
        "--inventory-override", str(override), "--reach-timeout", "2", "--hosts", "2", "--json",
    )  # fmt: skip
    assert result.code == 0, result.out
    reasons = _gate("gcp", image.image_id, 2)
    assert any("no multi-node result" in r and "--nodes 2" in r for r in reasons), reasons
    assert _gate("gcp", image.image_id, 1) == []
