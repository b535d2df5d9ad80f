"""Packer's ``-machine-readable`` output: one event per line.

A line is ``timestamp,target,type,data...``. Commas inside a field are written as
``%!(PACKER_COMMA)`` and newlines as a literal ``\\n``. The ``ui`` type carries what a
person would see (``say``, ``message``, ``error``); ``artifact`` lines carry the
artifacts of a build (the manifest post-processor's JSON is the source imagectl uses).
"""

from __future__ import annotations

from dataclasses import dataclass

COMMA = "%!(PACKER_COMMA)"


@dataclass(frozen=True)
class PackerEvent:
    timestamp: int
    target: str
    type: str
    data: tuple[str, ...]

    @property
    def ui_level(self) -> str | None:
        """``say``, ``message`` or ``error`` for ``ui`` events, else None."""
        if self.type == "ui" and self.data:
            return self.data[0]
        return None

    @property
    def text(self) -> str:
        """What a person would read for this event."""
        if self.type == "ui":
            return self.data[1] if len(self.data) > 1 else ""
        return " ".join(self.data)

    @property
    def is_error(self) -> bool:
        return self.ui_level == "error" or self.type == "error"


def unescape(field: str) -> str:
    return field.replace(COMMA, ",").replace("\\n", "\n").replace("\\r", "\r")


def parse_line(line: str) -> PackerEvent | None:
    """One machine-readable line -> event; None for anything that is not one."""
    line = line.rstrip("\r\n")
    parts = line.split(",")
    if len(parts) < 3 or not parts[0].isdigit():
        return None
    return PackerEvent(
        timestamp=int(parts[0]),
        target=unescape(parts[1]),
        type=parts[2],
        data=tuple(unescape(p) for p in parts[3:]),
    )
