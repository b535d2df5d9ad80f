"""Fabrics are keyed by fabric, not by cloud: the stack's ``network``
keys, the validator's expect.json ``network`` keys, the Ansible roles and the shapes'
``nics.fabric`` are the same names (efa, infiniband), and a cloud's stack section names
the fabrics its images install. A stack or an expect.json from before the rename is
handled: the stack's old key is one clear error naming the new one, an image's baked
expect.json is still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from imagectl.clouds.registry import specs
from imagectl.stacks.schema import NetworkPins
from imagectl.validators.expectations import Network
from imagectl.validators.fabric.applies import Fabric

REPO = Path(__file__).resolve().parents[2]


def test_every_fabric_a_cloud_installs_is_a_key_a_role_and_a_shape_fabric() -> None:
    installed = {f for spec in specs().values() for f in spec.section.fabrics}
    assert installed == set(NetworkPins.model_fields) == set(Network.model_fields)
    shapes = yaml.safe_load((REPO / "images" / "catalog" / "shapes.yaml").read_text())
    used = {
        (row.get("nics") or {}).get("fabric")
        for rows in shapes.values()
        if isinstance(rows, dict)
        for row in rows.values()
        if isinstance(row, dict)
    }
    site = (REPO / "playbooks" / "site.yml").read_text()
    for fabric in installed:
        assert fabric in Fabric.__args__ and fabric in used, fabric
        assert (REPO / "playbooks" / "roles" / fabric / "tasks" / "main.yml").is_file()
        assert f"- role: {fabric}\n      when: {fabric}_enabled | bool" in site
    roles = {p.name for p in (REPO / "playbooks" / "roles").iterdir()}
    assert not {r for r in roles if r.startswith(tuple(f"{c}_" for c in specs()))}


def test_a_stack_with_a_cloud_named_fabric_key_is_told_the_new_name(
    cli: Any, workspace_copy: Path
) -> None:
    path = workspace_copy / "images" / "stacks" / "h100-training.yaml"
    path.write_text(path.read_text().replace("\n  efa:\n", "\n  aws_efa:\n"))
    result = cli("--root", str(workspace_copy), "plan", "--stack", "h100-training", "--offline")
    assert result.code == 2
    message = " ".join(result.err.split())
    assert "network.aws_efa is now network.efa" in message and str(path) in message
    assert "Traceback" not in result.err


def test_an_expect_json_from_before_the_rename_is_read() -> None:
    old = json.loads(
        (REPO / "tests/fixtures/snapshots_before_issue43/expect-h100-ndv5-ib.json").read_text()
    )
    assert "azure_infiniband" in old["network"]
    net = Network.model_validate(old["network"])
    assert net.infiniband is not None and net.pins("infiniband") is net.infiniband
    assert net.pins("gvnic") is None and net.pins("efa") is None
    assert set(Network().model_dump()) == {"efa", "infiniband"}
