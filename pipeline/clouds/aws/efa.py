"""The EFA interfaces an instance type takes at launch (``efa.yaml``, each entry with its
source), as EC2's ``NetworkInterfaces``: one per network card, ``InterfaceType=efa``."""

from __future__ import annotations

import functools
from pathlib import Path

from imagectl.core.yamlfast import load_data

DATA = Path(__file__).with_name("efa.yaml")


@functools.cache
def _cards() -> dict[str, int]:
    raw = load_data(DATA)["instance_types"]
    return {name: int(entry["network_cards"]) for name, entry in raw.items()}


def efa_cards(instance_type: str) -> int:
    """How many EFA interfaces ``instance_type`` takes (0: not an EFA shape here)."""
    return _cards().get(instance_type, 0)


def efa_interfaces(instance_type: str, *, group_id: str, subnet_id: str) -> list[dict[str, object]]:
    """``RunInstances`` ``NetworkInterfaces`` for the shape: card 0 is the primary (device
    0), every other card device 1; each an EFA in ``subnet_id`` and ``group_id``."""
    return [
        {
            "NetworkCardIndex": card,
            "DeviceIndex": 0 if card == 0 else 1,
            "InterfaceType": "efa",
            "Groups": [group_id],
            "SubnetId": subnet_id,
            "DeleteOnTermination": True,
        }
        for card in range(efa_cards(instance_type))
    ]
