"""The rollout's thresholds, read from ``policy.yaml`` (data, each with its reason)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from imagectl.core.yamlfast import load_data

POLICY_FILE = Path(__file__).with_name("policy.yaml")


class Threshold(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: float
    reason: str


class XidClass(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    codes: list[int]
    reason: str


class NodeClass(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    reason: str


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int
    window_s: Threshold
    min_canary_nodes: Threshold
    min_baseline_nodes: Threshold
    min_canary_node_hours: Threshold
    alpha: Threshold
    min_rate_ratio: Threshold
    min_excess_fraction: Threshold
    xid_classes: list[XidClass]
    node_classes: list[NodeClass]

    @property
    def comparisons(self) -> int:
        return len(self.xid_classes) + len(self.node_classes)


@cache
def load_policy(path: Path = POLICY_FILE) -> Policy:
    return Policy.model_validate(load_data(path))
