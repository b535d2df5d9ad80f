"""``data/fabric.yaml``: InfiniBand port states and error-counter rules, and the network
NCCL must report per fabric, each with its source."""

from __future__ import annotations

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
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"validators/data/fabric.yaml: malformed: {exc}") from exc


def _rule(entry: dict[str, Any]) -> Rule:
    extra = {k: v for k, v in entry.items() if k not in ("action", "source", "reason")}
    return Rule(Action(entry["action"]), entry["source"], entry.get("reason", ""), extra)
