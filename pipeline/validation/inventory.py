"""Inventory host variables for launched instances, and the documented override.

Production: each host is reached over SSH at the instance's address with the run's key
(``ansible_host``, ``ansible_user``, ``ansible_ssh_private_key_file``); the instance is
new, so its host key is accepted on first use (and the instance dies after the run).

Override (``--inventory-override FILE``, YAML), for a lab, a bastion, or test mode::

    all:                 # vars for every host (e.g. ansible_connection: local)
      ansible_connection: local
      validate_imagectl: /path/to/venv/bin/imagectl
      validate_hygiene_root: /tmp/empty-root
    slots:               # vars per host slot, in launch order; replacement hosts
      - validate_snapshot: tests/snapshots/healthy/h100-sxm-8x.json     # continue the
      - validate_snapshot: tests/snapshots/faults/h100-sxm-8x--xid79-fallen-off-bus.json
    default_slot:        # vars for slots past the list
      validate_snapshot: tests/snapshots/healthy/h100-sxm-8x.json

In test mode the "instance" is the local machine: ``ansible_connection: local``, the
validator is the controller's own imagectl, and each slot replays a snapshot, so real
receipts from the real validator reach the decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from imagectl.errors import UserError

# Ansible's connection plugin that runs on the controller itself (not the local cloud)
ANSIBLE_LOCAL = "local"


@dataclass(frozen=True)
class InventoryOverride:
    all: dict[str, Any] = field(default_factory=dict)
    slots: list[dict[str, Any]] = field(default_factory=list)
    default_slot: dict[str, Any] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.all.get("ansible_connection") == ANSIBLE_LOCAL

    def for_slot(self, slot: int) -> dict[str, Any]:
        extra = self.slots[slot] if slot < len(self.slots) else self.default_slot
        return {**self.all, **(extra or {})}

    @classmethod
    def load(cls, path: Path) -> InventoryOverride:
        try:
            data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        except (OSError, YAMLError) as exc:
            raise UserError(f"cannot read the inventory override: {exc}", where=str(path)) from exc
        if not isinstance(data, dict):
            raise UserError(
                "the inventory override must be a mapping",
                where=str(path),
                hint="Use the keys all, slots and default_slot",
            )
        unknown = set(data) - {"all", "slots", "default_slot"}
        if unknown:
            raise UserError(
                f"unknown key(s) {', '.join(sorted(unknown))}",
                where=str(path),
                hint="Use the keys all, slots and default_slot",
            )
        base = path.parent

        def resolve(d: dict[str, Any]) -> dict[str, Any]:
            out = dict(d or {})
            snap = out.get("validate_snapshot")
            if snap and not Path(snap).is_absolute() and (base / snap).exists():
                out["validate_snapshot"] = str((base / snap).resolve())
            return out

        return cls(
            all=dict(data.get("all") or {}),
            slots=[resolve(s) for s in data.get("slots") or []],
            default_slot=resolve(data.get("default_slot") or {}),
        )
