"""Debian-format package indexes (``Packages``, ``Packages.gz``, ``Packages.xz``).

NVIDIA's CUDA repositories and Debian's archive publish the same format: stanzas of
``Field: value`` lines separated by blank lines. ``load_index`` fetches a repository
folder's index (trying the compressed names first), decompresses it and keeps, per
package name, every version offered with its ``Depends``.
"""

from __future__ import annotations

import gzip
import lzma
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from imagectl.core.errors import UserError
from imagectl.drift.http_cache import FetchFailed, NotFound, fetch

INDEX_NAMES = ("Packages.gz", "Packages.xz", "Packages")


@dataclass(frozen=True)
class Entry:
    package: str
    version: str
    depends: str = ""


@dataclass
class PackageIndex:
    """Versions offered per package, merged over one or more index files."""

    urls: list[str] = field(default_factory=list)
    packages: dict[str, list[Entry]] = field(default_factory=dict)
    from_cache: list[bool] = field(default_factory=list)

    def versions(self, package: str) -> list[str]:
        return [e.version for e in self.packages.get(package, [])]

    def entries(self, package: str) -> list[Entry]:
        return list(self.packages.get(package, []))

    def names(self, pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(n for n in self.packages if rx.fullmatch(n))

    def add(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            bucket = self.packages.setdefault(e.package, [])
            if all(x.version != e.version for x in bucket):
                bucket.append(e)


def decompress(url: str, body: bytes) -> str:
    try:
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        elif body[:6] == b"\xfd7zXZ\x00":
            body = lzma.decompress(body)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise UserError(f"package index {url} is corrupt: {exc}") from exc
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"package index {url} is not a text Packages file (byte {exc.start} is not UTF-8)"
        ) from exc


def parse(text: str, wanted: Callable[[str], bool] | None = None, *, url: str = "") -> list[Entry]:
    """Stanzas -> entries; ``wanted(name)`` filters early (Debian's index is large)."""
    out: list[Entry] = []
    for stanza in text.split("\n\n"):
        if not stanza.strip():
            continue
        fields: dict[str, str] = {}
        last = ""
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t"):
                if last:
                    fields[last] += " " + line.strip()
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise UserError(
                    f"package index {url} is malformed: line '{line[:60]}' is not 'Field: value'",
                    hint="Check the repository URL points at a Debian 'Packages' index",
                )
            last = key.strip()
            fields[last] = value.strip()
            if last == "Package" and wanted is not None and not wanted(fields[last]):
                break
        name = fields.get("Package")
        if name is None or (wanted is not None and not wanted(name)):
            continue
        if "Version" not in fields:
            raise UserError(f"package index {url}: package {name} has no Version field")
        out.append(Entry(name, fields["Version"], fields.get("Depends", "")))
    return out


def load_index(
    folder_urls: Iterable[str],
    wanted: Callable[[str], bool] | None = None,
    *,
    names: tuple[str, ...] = INDEX_NAMES,
) -> PackageIndex:
    """Read the index of every repository folder (``.../binary-amd64``) and merge them."""
    index = PackageIndex()
    for folder in folder_urls:
        url, fetched_body, cached = _first_existing(folder.rstrip("/"), names)
        index.urls.append(url)
        index.from_cache.append(cached)
        index.add(parse(decompress(url, fetched_body), wanted, url=url))
    return index


def _first_existing(folder: str, names: tuple[str, ...]) -> tuple[str, bytes, bool]:
    tried = []
    for name in names:
        url = f"{folder}/{name}"
        try:
            got = fetch(url)
        except NotFound:
            tried.append(url)
            continue
        except FetchFailed as exc:
            raise UserError(
                f"cannot read package index {exc}",
                hint="Check the network, or point the drift check at a mirror "
                "(IMAGECTL_NVIDIA_REPO_URL / the stack's mirror)",
            ) from exc
        return url, got.body, got.from_cache
    raise UserError(
        f"no package index under {folder} (tried {', '.join(names)})",
        hint="Check the repository URL, distro and architecture",
    )
