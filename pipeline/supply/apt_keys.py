"""The vendor apt keys an image may trust, pinned by fingerprint (images/compat/apt_keys.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import load_data

_FPR = re.compile(r"^[0-9A-F]{40}([0-9A-F]{24})?$")  # v4 (SHA-1) or v6 (SHA-256)


@dataclass(frozen=True)
class AptKey:
    name: str
    key_file: str
    fingerprints: tuple[str, ...]
    source: str


def load_apt_keys(compat_dir: Path) -> dict[str, AptKey]:
    path = compat_dir / "apt_keys.yaml"
    doc = load_data(path)
    keys = {}
    for name, entry in (doc or {}).items():
        fprs = tuple(str(f).replace(" ", "").upper() for f in entry.get("fingerprints") or ())
        bad = [f for f in fprs if not _FPR.match(f)]
        if not fprs or bad or not entry.get("source") or not entry.get("key_file"):
            raise UserError(
                f"{name}: needs key_file, source and fingerprints of 40 or 64 hex digits"
                + (f" (not {', '.join(bad)})" if bad else ""),
                where=str(path),
            )
        keys[name] = AptKey(name, str(entry["key_file"]), fprs, str(entry["source"]))
    return keys
