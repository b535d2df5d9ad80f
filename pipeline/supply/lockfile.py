"""The lock file format: pip requirements with ``--hash``, one pinned line per wheel set.

A lock names every distribution a target installs as ``name==version`` with the sha256 of
each wheel it may use (one per target Python), and a ``python_version`` marker where a
distribution is needed only on some targets. Its header records the digest of what it was
made from (the requirements and the targets), so a test can tell when it went stale. The
text is a function of its entries alone (sorted, one format): regenerating from the same
index gives the same bytes.

For one target the controller writes the lock without markers (``for_python``), which is
what a wheelhouse carries as ``requirements.lock`` and what ``pip install --require-hashes``
reads on the host.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from imagectl.core.errors import UserError

HEADER = "# imagectl lock"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class LockEntry:
    name: str  # canonical (PEP 503)
    version: str
    hashes: tuple[str, ...]  # sha256 hex, sorted
    pythons: tuple[str, ...] = ()  # the target Pythons that need it; () = every target

    def applies_to(self, python: str) -> bool:
        return not self.pythons or python in self.pythons

    def line(self, *, markers: bool = True) -> str:
        head = f"{self.name}=={self.version}"
        if markers and self.pythons:
            head += " ; " + " or ".join(f'python_version == "{p}"' for p in self.pythons)
        hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in self.hashes)
        return head + hashes


@dataclass(frozen=True)
class Lock:
    title: str  # what it locks, one line
    command: str  # the command that regenerates it
    requirements: tuple[str, ...]  # the inputs, as written
    pythons: tuple[str, ...]  # target Pythons (X.Y)
    platforms: tuple[str, ...]  # wheel platform tags the targets accept
    entries: tuple[LockEntry, ...] = field(default=())

    @property
    def inputs_digest(self) -> str:
        return inputs_digest(self.requirements, self.pythons, self.platforms)

    def entry(self, name: str) -> LockEntry | None:
        key = canonicalize_name(name)
        return next((e for e in self.entries if e.name == key), None)

    def render(self) -> str:
        meta = {
            "requirements": list(self.requirements),
            "pythons": list(self.pythons),
            "platforms": list(self.platforms),
        }
        lines = [
            f"{HEADER}: {self.title}",
            f"# Regenerate with: {self.command}",
            "# Generated: review the diff like code, never edit by hand.",
            f"# inputs-sha256: {self.inputs_digest}",
            f"# inputs: {json.dumps(meta, sort_keys=True)}",
            *(e.line() for e in sorted(self.entries, key=lambda e: (e.name, e.pythons))),
        ]
        return "\n".join(lines) + "\n"

    def for_python(self, python: str) -> str:
        """The lock one target installs from: its entries, no markers, no header digest."""
        lines = [
            f"{HEADER}: {self.title} (Python {python})",
            *(e.line(markers=False) for e in sorted(self.entries, key=lambda e: e.name)
              if e.applies_to(python)),
        ]  # fmt: skip
        return "\n".join(lines) + "\n"

    def hashes_for(self, python: str) -> dict[tuple[str, str], frozenset[str]]:
        return {
            (e.name, e.version): frozenset(e.hashes) for e in self.entries if e.applies_to(python)
        }


def inputs_digest(requirements: Iterable[str], pythons: Iterable[str], platforms: Iterable[str]):
    doc = {
        "requirements": sorted(str(Requirement(r)) for r in requirements),
        "pythons": sorted(pythons),
        "platforms": list(platforms),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def merge(per_python: Mapping[str, Mapping[str, tuple[str, str]]]) -> tuple[LockEntry, ...]:
    """{python: {name: (version, sha256)}} -> entries; a marker only where a distribution
    (at that version) is not needed by every target."""
    everywhere = set(per_python)
    found: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for python, dists in per_python.items():
        for name, (version, sha) in dists.items():
            pys, hashes = found.setdefault((canonicalize_name(name), version), (set(), set()))
            pys.add(python)
            hashes.add(sha)
    entries = []
    for (name, version), (pys, hashes) in found.items():
        pythons = () if pys == everywhere else tuple(sorted(pys, key=_py_key))
        entries.append(LockEntry(name, version, tuple(sorted(hashes)), pythons))
    return tuple(sorted(entries, key=lambda e: (e.name, e.pythons)))


def _py_key(python: str) -> tuple[int, ...]:
    return tuple(int(p) for p in python.split("."))


def parse(text: str, *, where: str) -> Lock:
    """Read a lock this module wrote; anything else is a clear error naming the line."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(HEADER + ": "):
        raise UserError(
            f"not an imagectl lock (its first line must start with '{HEADER}:')",
            where=where,
            hint="Regenerate it with python -m imagectl.supply.lock",
        )
    title = lines[0][len(HEADER) + 2 :]
    meta: dict[str, list[str]] = {}
    command = ""
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(lines[1:], start=2):
        if raw.startswith("# Regenerate with: "):
            command = raw.removeprefix("# Regenerate with: ")
        elif raw.startswith("# inputs: "):
            try:
                meta = json.loads(raw.removeprefix("# inputs: "))
            except json.JSONDecodeError as exc:
                raise UserError(f"line {number}: unreadable inputs: {exc}", where=where) from None
        if raw.startswith("#") or not raw.strip():
            continue
        if not pending:
            start = number
        pending += " " + raw.rstrip("\\").strip()
        if not raw.endswith("\\"):
            logical.append((start, pending.strip()))
            pending = ""
    entries = [_entry(line, number, where) for number, line in logical]
    names = [e.name for e in entries if not e.pythons]
    if len(names) != len(set(names)):
        raise UserError("a distribution is pinned twice for every target", where=where)
    return Lock(
        title=title,
        command=command,
        requirements=tuple(meta.get("requirements", ())),
        pythons=tuple(meta.get("pythons", ())),
        platforms=tuple(meta.get("platforms", ())),
        entries=tuple(entries),
    )


def _entry(line: str, number: int, where: str) -> LockEntry:
    spec, *options = line.split(" --hash=")
    try:
        req = Requirement(spec.strip())
    except InvalidRequirement as exc:
        raise UserError(f"line {number}: {exc}", where=where) from None
    pins = list(req.specifier)
    if len(pins) != 1 or pins[0].operator != "==" or "*" in pins[0].version:
        raise UserError(f"line {number}: {req.name} is not pinned with ==", where=where)
    hashes = []
    for option in options:
        algo, _, digest = option.strip().partition(":")
        if algo != "sha256" or not _SHA256.match(digest):
            raise UserError(f"line {number}: {option!r} is not a sha256 hash", where=where)
        hashes.append(digest)
    if not hashes:
        raise UserError(f"line {number}: {req.name} has no --hash", where=where)
    pythons = _marker_pythons(req.marker, number, where) if req.marker else ()
    return LockEntry(canonicalize_name(req.name), pins[0].version, tuple(sorted(hashes)), pythons)


def _marker_pythons(marker: Marker, number: int, where: str) -> tuple[str, ...]:
    found = re.findall(r'python_version == "([0-9.]+)"', str(marker))
    try:
        rebuilt = Marker(" or ".join(f'python_version == "{p}"' for p in found)) if found else None
    except InvalidMarker:
        rebuilt = None
    if rebuilt is None or str(rebuilt) != str(marker):
        raise UserError(
            f"line {number}: only python_version == markers are allowed, not '{marker}'",
            where=where,
        )
    return tuple(found)


def load(path: Path) -> Lock:
    if not path.is_file():
        raise UserError(
            f"no lock file at {path}",
            hint="Generate it with python -m imagectl.supply.lock and commit it",
        )
    return parse(path.read_text(encoding="utf-8"), where=str(path))
