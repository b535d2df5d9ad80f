"""Version strings of the GPU stack, parsed once.

NVIDIA driver versions (``580.95.05``), CUDA toolkit versions (``12.8.1``), Debian
package versions with epoch and revision (``1:4.2.3-1``) and NCCL package versions
(``2.26.2-1+cuda12.8``) are compared as tuples of integers, never as strings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import total_ordering

from imagectl.core.errors import UserError

_DOTTED = re.compile(r"^\d+(\.\d+)*$")
_NCCL = re.compile(r"^(?P<version>\d+\.\d+\.\d+)-(?P<rev>\d+)\+cuda(?P<cuda>\d+\.\d+)$")


@total_ordering
@dataclass(frozen=True)
class Dotted:
    """A purely numeric dotted version such as a driver or CUDA toolkit version."""

    text: str
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str, *, what: str = "version") -> Dotted:
        text = str(text).strip()
        if not _DOTTED.match(text):
            raise UserError(
                f"cannot parse {what} '{text}'",
                hint="Use dotted numbers such as 580.95.05 (driver) or 12.8.1 (CUDA)",
            )
        return cls(text, tuple(int(p) for p in text.split(".")))

    def padded(self, n: int = 3) -> tuple[int, ...]:
        return self.parts + (0,) * (n - len(self.parts))

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Dotted):
            return NotImplemented
        return self.padded(4) < other.padded(4)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dotted):
            return NotImplemented
        return self.padded(4) == other.padded(4)

    def __hash__(self) -> int:
        return hash(self.padded(4))

    def __str__(self) -> str:
        return self.text


def upstream_version(deb_version: str) -> str:
    """``1:580.95.05-0ubuntu1`` -> ``580.95.05`` (no epoch, no Debian revision: the
    revision is what follows the last hyphen, Debian Policy 5.6.12)."""
    rest = deb_version.split(":", 1)[-1]
    return rest.rsplit("-", 1)[0] if "-" in rest else rest


def driver_branch(driver: str) -> int:
    """The branch of a driver version: ``580.95.05`` -> 580."""
    return Dotted.parse(driver, what="driver version").major


@dataclass(frozen=True)
class NcclVersion:
    """``2.26.2-1+cuda12.8``: NCCL version, package revision and the CUDA it was built for."""

    text: str
    version: Dotted
    revision: int
    cuda: Dotted

    @classmethod
    def parse(cls, text: str) -> NcclVersion:
        m = _NCCL.match(str(text).strip())
        if not m:
            raise UserError(
                f"cannot parse NCCL version '{text}'",
                hint="Use the package version from NVIDIA's repository, e.g. 2.26.2-1+cuda12.8",
            )
        return cls(
            text=str(text).strip(),
            version=Dotted.parse(m["version"]),
            revision=int(m["rev"]),
            cuda=Dotted.parse(m["cuda"]),
        )

    def __str__(self) -> str:
        return self.text


def debian_version_key(version: str) -> DebianVersion:
    """A sort key for Debian package versions ([epoch:]upstream[-revision]), ordered exactly
    as ``dpkg --compare-versions`` orders them (tests/drift use dpkg as the oracle)."""
    return DebianVersion(version)


@functools.total_ordering
class DebianVersion:
    """A Debian package version, compared with dpkg's own algorithm (``verrevcmp`` in
    dpkg's lib/dpkg/version.c): epochs numerically, then upstream and revision, each as
    alternating non-digit runs (``~`` before the end, the end before letters, letters before
    other characters) and digit runs (numerically)."""

    __slots__ = ("epoch", "revision", "text", "upstream")

    def __init__(self, text: str) -> None:
        self.text = str(text).strip()
        rest = self.text
        self.epoch = 0
        head, colon, tail = rest.partition(":")
        if colon and head.isdigit():
            self.epoch, rest = int(head), tail
        upstream, hyphen, revision = rest.rpartition("-")
        self.upstream, self.revision = (upstream, revision) if hyphen else (rest, "")

    def _cmp(self, other: DebianVersion) -> int:
        if self.epoch != other.epoch:
            return -1 if self.epoch < other.epoch else 1
        return verrevcmp(self.upstream, other.upstream) or verrevcmp(self.revision, other.revision)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DebianVersion) and self._cmp(other) == 0

    def __lt__(self, other: DebianVersion) -> bool:
        return self._cmp(other) < 0

    def __hash__(self) -> int:  # equal versions hash equal: digit runs by value, 0 as absent
        def norm(part: str) -> str:
            return re.sub(r"\d+", lambda m: str(int(m.group())) if int(m.group()) else "", part)

        return hash((self.epoch, norm(self.upstream), norm(self.revision)))

    def __repr__(self) -> str:
        return f"DebianVersion({self.text!r})"


def _order(c: str) -> int:
    if c.isdigit():
        return 0
    if c.isascii() and c.isalpha():
        return ord(c)
    if c == "~":
        return -1
    return ord(c) + 256


def verrevcmp(a: str, b: str) -> int:
    """dpkg's comparison of two upstream (or revision) strings: <0, 0 or >0."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i, j = i + 1, j + 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0
