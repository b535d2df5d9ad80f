"""``ResolvedStack.pins()`` is a typed, frozen value: read by attribute
in every package, JSON only through ``to_dict``."""

from __future__ import annotations

import dataclasses

import pytest

from imagectl.stacks import load_resolved
from imagectl.stacks.resolve import Pins
from tests.support import REPO


def test_pins_are_the_stacks_own_and_cannot_be_changed() -> None:
    _, resolved = load_resolved(REPO / "images", "h100-training")
    pins = resolved.pins()
    assert isinstance(pins, Pins)
    n = resolved.stack.nvidia
    assert n is not None
    assert (pins.driver, pins.cuda, pins.nccl) == (n.driver.version, n.cuda, n.nccl)
    assert pins.stack_digest == resolved.digest
    assert pins.fabric_manager == n.driver.version  # H100 SXM: NVSwitch
    assert pins.validator_toolkit == {"torch": "2.9.1", "cuda": "12.8", "variant": "cu128"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        pins.driver = "1.0"  # type: ignore[misc]


def test_the_json_edge_has_every_field() -> None:
    _, resolved = load_resolved(REPO / "images", "local")
    data = resolved.pins().to_dict()
    assert list(data) == [f.name for f in dataclasses.fields(Pins)]
    assert data["driver"] is None and data["imex"] is False  # the local stack has no GPUs
