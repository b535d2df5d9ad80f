"""Every GPU network of every shape is judged: each shape's kind of GPU network (its
nics.fabric, and on gVNIC its GPUDirect flavour) has an NCCL rule in
validators/data/fabric.yaml ``nccl_net`` that names the network NCCL must use and how the
NICs it opened are seen; none is a skip. Every kind the shape table can express is
enumerated (a new kind without a rule fails here), and each rule's network is told apart
from NCCL's TCP fallback as NCCL's log prints it."""

from __future__ import annotations

import itertools
import typing
from pathlib import Path

import pytest

from imagectl.validators.fabric.parse import nccl_net
from imagectl.validators.fabric.policy import fabric_policy, nccl_kind, net_rules, network_matches
from imagectl.validators.nics import Fabric, GpuDirect, Nics
from imagectl.validators.shapes import shape_rows

CATALOG = Path(__file__).resolve().parents[2] / "images" / "catalog"
GPU_SHAPES = {n: r for n, r in shape_rows(CATALOG).items() if r.get("gpu")}
# the kinds the shape table can express: gVNIC with each GPUDirect flavour, the others alone
KINDS = sorted(
    {
        nccl_kind(f, g)
        for f, g in itertools.product(typing.get_args(Fabric), typing.get_args(GpuDirect))
    }
)


def test_the_kinds_are_the_ones_the_issue_names() -> None:
    assert set(KINDS) == {
        "efa",
        "infiniband",
        "roce",
        "gvnic-tcpx",
        "gvnic-tcpxo",
        "gvnic",
        "none",
    }


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_rule_that_judges(kind: str) -> None:
    rule = net_rules().get(kind)
    assert rule is not None, f"no NCCL rule for {kind} in validators/data/fabric.yaml nccl_net"
    assert rule.source.strip()
    if rule.within_host:
        assert kind == "none", "only a shape whose GPUs use no NIC may leave NCCL's net free"
        return
    assert rule.names, f"{kind}: the rule names no network NCCL must use"
    assert rule.rails, f"{kind}: the rule says not how the NICs NCCL opened are seen"
    if "ifname" in rule.rails:
        assert rule.ifname in (fabric_policy().nccl_rails.extra or {})["settings"]


@pytest.mark.parametrize("shape", sorted(GPU_SHAPES))
def test_every_gpu_shape_has_its_networks_rule(shape: str) -> None:
    nics = Nics.model_validate(GPU_SHAPES[shape]["nics"])
    rule = net_rules()[nccl_kind(nics.fabric, nics.gpudirect)]
    assert rule.within_host == (nics.fabric == "none"), shape
    if nics.fabric == "gvnic":  # the plugin follows the shape's GPUDirect flavour
        want = {"tcpx": "GPUDirectTCPX", "tcpxo": "FasTrak"}.get(nics.gpudirect or "", "Socket")
        assert rule.names == (want,), shape


def _log(network: str) -> str:
    return f"host:1:2 [0] NCCL INFO Using network {network}\n"


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "none"])
def test_each_rules_network_is_told_from_the_tcp_fallback(kind: str) -> None:
    rule = net_rules()[kind]
    for name in rule.names:
        assert network_matches(nccl_net(_log(name)).network, list(rule.names))
        assert network_matches(nccl_net(_log(f"{name}_v7")).network, list(rule.names))
    fallback = fabric_policy().nccl_fallback
    assert network_matches(nccl_net(_log(fallback)).network, list(rule.names)) == (
        kind == "gvnic"  # gVNIC without GPUDirect: TCP is the network
    )
    assert not network_matches(nccl_net(_log("Bogus")).network, list(rule.names))
