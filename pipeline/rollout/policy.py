"""The rollout's thresholds, read from ``policy.yaml`` (data, each with its reason)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from imagectl.core.errors import UserError
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
    sequential: Threshold
    max_unknown_fraction: Threshold
    min_watch_ok_share: Threshold
    look_interval_s: Threshold
    max_look_age_s: Threshold
    max_clock_skew_s: Threshold
    require_launch_record: Threshold
    launch_time_step_s: Threshold
    max_split_nodes: Threshold
    xid_classes: list[XidClass]
    node_classes: list[NodeClass]

    @property
    def comparisons(self) -> int:
        return len(self.xid_classes) + len(self.node_classes)

    def alpha_at(self, look: int) -> float:
        """The significance spent at the ``look``-th tested look of a candidate (1, 2, ...):
        ``alpha / (look * (look + 1))``, whose sum over every look is ``alpha``."""
        n = max(1, int(look))
        return self.alpha.value / (n * (n + 1))


POLICY_ENV = "IMAGECTL_ROLLOUT_POLICY"  # a fleet's own thresholds (same schema)


def policy_from_env() -> Policy:
    """``$IMAGECTL_ROLLOUT_POLICY``'s policy file, else the shipped one."""
    raw = os.environ.get(POLICY_ENV, "").strip()
    if not raw:
        return load_policy()
    path = Path(raw)
    try:
        return load_policy(path)
    except FileNotFoundError:
        raise UserError(f"{POLICY_ENV}={raw!r}: no such file") from None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UserError(f"{raw}: not a rollout policy: {exc}") from None


@cache
def load_policy(path: Path = POLICY_FILE) -> Policy:
    return Policy.model_validate(load_data(path))
