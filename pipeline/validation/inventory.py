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
    toolkit:             # the GPU toolkit for the hosts from another lock (and index)
      lock: stand-in-toolkit.lock          # relative to this file
      index_url: file:///srv/toolkit-index # default: IMAGECTL_TOOLKIT_INDEX_URL or PyTorch's

A host that replays a snapshot judges the toolkit the snapshot recorded, so it is shipped
the stack's toolkit only when the override names one (``toolkit``: a lab mirror, or a
stand-in toolkit that exercises the install path in tests); a live host always gets the
stack's (``imagectl.validation.toolkit``).

In test mode the "instance" is the local machine: ``ansible_connection: local``, the
validator is the controller's own imagectl, and each slot replays a snapshot, so real
receipts from the real validator reach the decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from imagectl.core.errors import UserError

# Ansible's connection plugin that runs on the controller itself (not the local cloud)
ANSIBLE_LOCAL = "local"


KEYS = ("all", "slots", "default_slot", "toolkit")


@dataclass(frozen=True)
class ToolkitSource:
    """Where the hosts' toolkit comes from instead of the stack's own lock and index."""

    lock: Path
    index_url: str | None = None


@dataclass(frozen=True)
class InventoryOverride:
    # Ansible host variables as the file gives them (opaque: Ansible reads them)
    all: dict[str, object] = field(default_factory=dict)
    slots: list[dict[str, object]] = field(default_factory=list)
    default_slot: dict[str, object] = field(default_factory=dict)
    toolkit: ToolkitSource | None = None

    @property
    def local(self) -> bool:
        return self.all.get("ansible_connection") == ANSIBLE_LOCAL

    def for_slot(self, slot: int) -> dict[str, object]:
        extra = self.slots[slot] if slot < len(self.slots) else self.default_slot
        return {**self.all, **(extra or {})}

    def replays(self, slot: int) -> bool:
        """The host in this slot replays a snapshot (it judges no live hardware)."""
        return bool(self.for_slot(slot).get("validate_snapshot"))

    @property
    def replays_only(self) -> bool:
        """Every slot, listed or past the list, replays a snapshot."""
        return all(self.replays(i) for i in range(len(self.slots) + 1))

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
        unknown = set(data) - set(KEYS)
        if unknown:
            raise UserError(
                f"unknown key(s) {', '.join(sorted(unknown))}",
                where=str(path),
                hint=f"Use the keys {', '.join(KEYS)}",
            )
        base = path.parent

        def resolve(d: object) -> dict[str, object]:
            out = _mapping(d, path)
            snap = out.get("validate_snapshot")
            if (
                isinstance(snap, str)
                and snap
                and not Path(snap).is_absolute()
                and ((base / snap).exists())
            ):
                out["validate_snapshot"] = str((base / snap).resolve())
            return out

        return cls(
            all=_mapping(data.get("all"), path),
            slots=[resolve(s) for s in _list(data.get("slots"), path)],
            default_slot=resolve(data.get("default_slot") or {}),
            toolkit=_toolkit_source(data.get("toolkit"), path),
        )


def _mapping(value: object, path: Path) -> dict[str, object]:
    """A mapping of host variables (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(
            f"host variables must be a mapping, not {type(value).__name__}",
            where=str(path),
            hint="Write all:, each item of slots: and default_slot: as NAME: VALUE lines",
        )
    return {str(k): v for k, v in value.items()}


def _list(value: object, path: Path) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError(
            "slots must be a list (one mapping of host variables per slot)",
            where=str(path),
            hint="Write slots: as a list of mappings",
        )
    return list(value)


def _toolkit_source(doc: object, path: Path) -> ToolkitSource | None:
    if doc is None:
        return None
    hint = "Write toolkit: {lock: FILE, index_url: URL}: FILE a lock made by python -m "
    hint += "imagectl.supply.lock toolkit (relative to this file), URL optional"
    if not isinstance(doc, dict) or not isinstance(doc.get("lock"), str) or not doc["lock"]:
        raise UserError("toolkit needs a lock file", where=str(path), hint=hint)
    unknown = set(doc) - {"lock", "index_url"}
    index = doc.get("index_url")
    if unknown or (index is not None and not isinstance(index, str)):
        what = f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else "a bad index_url"
        raise UserError(f"toolkit has {what}", where=str(path), hint=hint)
    lock = Path(doc["lock"])
    lock = lock if lock.is_absolute() else (path.parent / lock).resolve()
    if not lock.is_file():
        raise UserError(f"toolkit: no lock file at {lock}", where=str(path), hint=hint)
    return ToolkitSource(lock, index or None)
