"""``data/fabric.yaml``: InfiniBand port states and error-counter rules, and the network
NCCL must report per fabric, each with its source."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from imagectl.errors import UserError
from imagectl.validators.catalogs import _load
from imagectl.validators.results import Action


@dataclass(frozen=True)
class CounterRule:
    name: str
    ibta: str
    warn_over: int
    fail_over: int | None
    source: str


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
                    c["name"], c["ibta"], int(c["warn_over"]), c.get("fail_over"), c["source"]
                )
                for c in doc["counters"]
            ),
            counters_source=doc["counters_source"],
            rising_max=int(rising["max"]),
            rising_action=Action(rising["action"]),
            rising_reason=f"imagectl policy: {rising['reason']} ({rising['source']})",
            nccl_net=dict(doc["nccl_net"]),
            nccl_fallback=doc["nccl_net"]["fallback"],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"validators/data/fabric.yaml: malformed: {exc}") from exc
