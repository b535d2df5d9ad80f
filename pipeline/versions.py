"""Version strings of the GPU stack, parsed once.

NVIDIA driver versions (``580.95.05``), CUDA toolkit versions (``12.8.1``), Debian
package versions with epoch and revision (``1:4.2.3-1``) and NCCL package versions
(``2.26.2-1+cuda12.8``) are compared as tuples of integers, never as strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from imagectl.errors import UserError

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


def debian_version_key(version: str) -> tuple[int, tuple[object, ...], tuple[object, ...]]:
    """A sort key for Debian package versions ([epoch:]upstream[-revision]).

    Implements dpkg's ordering closely enough for the versions NVIDIA and Debian publish:
    digits compare numerically, '~' sorts before everything, letters before non-letters.
    """
    epoch = 0
    rest = version
    if ":" in rest:
        head, rest = rest.split(":", 1)
        epoch = int(head) if head.isdigit() else 0
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
    return epoch, _dpkg_key(upstream), _dpkg_key(revision)


def _dpkg_key(part: str) -> tuple[object, ...]:
    out: list[object] = []
    for chunk in re.findall(r"\d+|\D+", part):
        if chunk.isdigit():
            out.append((1, int(chunk), ""))
        else:
            out.append((0, 0, tuple(_char_order(c) for c in chunk)))
    out.append((0, 0, (0,)))
    return tuple(out)


def _char_order(c: str) -> int:
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256
