"""Previous boots' receipts: which XIDs each GPU had in the boot before this one.

The fleet boot unit keeps one receipt per boot (``/var/lib/imagectl/boots/<boot id>.json``,
the last few); ``imagectl validate --history DIR`` reads them. A snapshot may record them
as the host fact ``boot_history`` (a list of receipts, or of their ``host``, ``started_at``,
``gpus`` and ``checks``) so that a replay judges recurrences too. A fault that a reboot
should have cleared and that the previous boot's receipt also shows, on the same GPU (by
UUID, not index), is a recurrence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.validators.jsonfile import read_json


@dataclass
class PreviousBoot:
    boot_id: str | None
    started_at: str
    origin: str
    # (code, GPU UUID, PCI device "0000:3b:00") of every XID that failed or warned
    incidents: list[tuple[int, str | None, str | None]] = field(default_factory=list)

    def had(self, code: int, uuid: str | None, bus: str | None) -> bool:
        """The same code on the same GPU: by UUID; by PCI device only where a side lacks
        the UUID (a GPU that fell off the bus cannot be asked for it)."""
        for c, u, d in self.incidents:
            if c != code:
                continue
            if uuid and u:
                if uuid == u:
                    return True
            elif bus and d == bus:
                return True
        return False


def _incidents(receipt: dict[str, Any]) -> list[tuple[int, str | None, str | None]]:
    uuids = {
        g.get("index"): g.get("uuid") for g in receipt.get("gpus") or [] if isinstance(g, dict)
    }
    out: list[tuple[int, str | None, str | None]] = []
    for c in receipt.get("checks") or []:
        if not isinstance(c, dict) or c.get("id") != "kernel.xid":
            continue
        if c.get("outcome") not in ("fail", "warn"):
            continue
        measured = c.get("measured")
        if not isinstance(measured, dict) or not isinstance(measured.get("code"), int):
            continue
        raw = c.get("details")
        details: dict[str, object] = raw if isinstance(raw, dict) else {}
        uuid = details.get("gpu_uuid") or uuids.get(c.get("gpu"))
        device = measured.get("device")
        out.append(
            (
                int(measured["code"]),
                uuid if isinstance(uuid, str) and uuid else None,
                device if isinstance(device, str) and device else None,
            )
        )
    return out


def _boot_id(receipt: dict[str, Any]) -> str | None:
    boot = (receipt.get("host") or {}).get("boot")
    return boot.get("boot_id") if isinstance(boot, dict) else None


def previous_boot(
    receipts: list[tuple[str, dict[str, Any]]], current_boot_id: str | None
) -> PreviousBoot | None:
    """The latest receipt of another boot than this one (by ``started_at``)."""
    others = [
        (origin, r)
        for origin, r in receipts
        if isinstance(r, dict) and (current_boot_id is None or _boot_id(r) != current_boot_id)
    ]
    if not others:
        return None
    origin, last = max(others, key=lambda o: str(o[1].get("started_at") or ""))
    return PreviousBoot(_boot_id(last), str(last.get("started_at") or ""), origin, _incidents(last))


def read_folder(folder: Path) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Every ``*.json`` receipt in ``folder``; unreadable ones are named, not fatal (a
    receipt half-written when the machine went down is exactly what a fleet keeps)."""
    out: list[tuple[str, dict[str, Any]]] = []
    unreadable: list[str] = []
    for path in sorted(folder.glob("*.json")):
        try:  # the hostile-input-safe reader (size, depth, huge numbers)
            doc = read_json(path, "boot receipt", "the next boot writes a new one")
        except UserError as exc:
            unreadable.append(f"{path.name}: {exc.render().splitlines()[0][:160]}")
            continue
        if isinstance(doc, dict) and doc.get("kind") == "imagectl.validation-receipt":
            out.append((str(path), doc))
        else:
            unreadable.append(f"{path.name}: not an imagectl receipt")
    return out, unreadable
