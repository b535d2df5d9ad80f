"""``data/fabric.yaml``: InfiniBand port states and error-counter rules, and the network
NCCL must report per fabric, each with its source."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from imagectl.core.errors import UserError
from imagectl.validators.catalogs import _load
from imagectl.validators.results import Action


@dataclass(frozen=True)
class CounterRule:
    name: str
    ibta: str
    warn_over: int
    fail_over: int | None
    source: str
    bits: int | None = None

    @property
    def maximum(self) -> int | None:
        """The value the counter stops at (IBTA: error counters do not wrap)."""
        return (1 << self.bits) - 1 if self.bits else None


@dataclass(frozen=True)
class Rule:
    """A rule of data/fabric.yaml with its action, source and (imagectl's) reason."""

    action: Action
    source: str
    reason: str = ""
    extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class FabricPolicy:
    state_active: int
    state_source: str
    phys_linkup: int
    phys_source: str
    rate_source: str
    counters: tuple[CounterRule, ...]
    counters_source: str
    rising_max: int
    rising_action: Action
    rising_reason: str
    nccl_net: dict[str, dict[str, Any]]
    nccl_fallback: str
    saturated: Rule
    efa_hw: Rule
    nic_pcie: Rule
    acs: Rule
    nccl_rails: Rule
    nic_rate: Rule


@dataclass(frozen=True)
class NetRule:
    """What NCCL must use on one kind of GPU network (data/fabric.yaml ``nccl_net``)."""

    kind: str
    names: tuple[str, ...]
    plugin: str | None
    rails: tuple[str, ...]
    source: str
    ifname: str | None = None
    within_host: bool = False


def net_rules() -> dict[str, NetRule]:
    """Every kind's rule, by kind (``nccl_kind``)."""
    out = {}
    for kind, entry in fabric_policy().nccl_net.items():
        if not isinstance(entry, dict):
            continue  # 'fallback': the name of NCCL's TCP transport
        out[kind] = NetRule(
            kind=kind,
            names=tuple(str(n) for n in entry.get("names") or ()),
            plugin=str(entry["plugin"]) if entry.get("plugin") else None,
            rails=tuple(str(r) for r in entry.get("rails") or ()),
            source=str(entry["source"]),
            ifname=str(entry["ifname"]) if entry.get("ifname") else None,
            within_host=bool(entry.get("within_host")),
        )
    return out


def nccl_kind(fabric: str, gpudirect: str | None) -> str:
    """The key of ``nccl_net`` for a shape's GPU network: its fabric, and on gVNIC its
    GPUDirect flavour (``gvnic-tcpx``, ``gvnic-tcpxo``; plain ``gvnic``: TCP)."""
    if fabric == "gvnic" and gpudirect in ("tcpx", "tcpxo"):
        return f"gvnic-{gpudirect}"
    return fabric


def network_matches(seen: str | None, names: list[str]) -> bool:
    """NCCL's 'Using network <seen>' is one of ``names`` (a plugin that appends its
    interface version, GPUDirectTCPX_v7, is GPUDirectTCPX)."""
    if seen is None:
        return False
    return any(seen == n or re.fullmatch(re.escape(n) + r"_v\d+", seen) for n in names)


@lru_cache(maxsize=1)
def fabric_policy() -> FabricPolicy:
    doc = _load("fabric.yaml")
    try:
        port = doc["ib_port"]
        rising = doc["rising"]
        return FabricPolicy(
            state_active=int(port["state"]["value"]),
            state_source=port["state"]["source"],
            phys_linkup=int(port["phys_state"]["value"]),
            phys_source=port["phys_state"]["source"],
            rate_source=port["rate_source"],
            counters=tuple(
                CounterRule(
                    c["name"],
                    c["ibta"],
                    int(c["warn_over"]),
                    c.get("fail_over"),
                    c["source"],
                    c.get("bits"),
                )
                for c in doc["counters"]
            ),
            counters_source=doc["counters_source"],
            rising_max=int(rising["max"]),
            rising_action=Action(rising["action"]),
            rising_reason=f"imagectl policy: {rising['reason']} ({rising['source']})",
            nccl_net=dict(doc["nccl_net"]),
            nccl_fallback=doc["nccl_net"]["fallback"],
            saturated=_rule(doc["saturated"]),
            efa_hw=_rule(doc["efa_hw_counters"]),
            nic_pcie=_rule(doc["nic_pcie"]),
            acs=_rule(doc["acs"]),
            nccl_rails=_rule(doc["nccl_rails"]),
            nic_rate=_rule({**doc["nic_rate"], "source": doc["nic_rate"]["roce"]}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"validators/data/fabric.yaml: malformed: {exc}") from exc


def _rule(entry: dict[str, Any]) -> Rule:
    extra = {k: v for k, v in entry.items() if k not in ("action", "source", "reason")}
    return Rule(Action(entry["action"]), entry["source"], entry.get("reason", ""), extra)
