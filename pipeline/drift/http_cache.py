"""Fetch a URL with an on-disk cache revalidated by HTTP validators.

For each URL the body and its validators (``ETag``, ``Last-Modified``) are kept under
``<state dir>/drift/http-cache/``. The next fetch sends ``If-None-Match`` /
``If-Modified-Since``; a ``304 Not Modified`` reuses the cached body, so a nightly run
downloads an index only when it changed. ``file://`` URLs are read directly.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from imagectl.paths import state_dir

USER_AGENT = "imagectl-drift/1"
TIMEOUT_S = 60.0


class NotFound(Exception):
    """The server (or file system) says the URL does not exist (try another name)."""


class FetchFailed(Exception):
    """The URL could not be read (network, permission, server error)."""


@dataclass(frozen=True)
class Fetched:
    url: str
    body: bytes
    from_cache: bool  # True when the server answered 304 and the cached body was used


def cache_dir() -> Path:
    path = state_dir() / "drift" / "http-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _paths(url: str) -> tuple[Path, Path]:
    key = hashlib.sha256(url.encode()).hexdigest()[:32]
    base = cache_dir()
    return base / f"{key}.body", base / f"{key}.json"


def fetch(url: str) -> Fetched:
    if url.startswith("file://"):
        return _read_file(url)
    body_path, meta_path = _paths(url)
    meta: dict[str, str] = {}
    if body_path.is_file() and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if meta.get("etag"):
        request.add_header("If-None-Match", meta["etag"])
    if meta.get("last_modified"):
        request.add_header("If-Modified-Since", meta["last_modified"])
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
            headers = response.headers
    except urllib.error.HTTPError as exc:
        if exc.code == 304 and meta:
            return Fetched(url, body_path.read_bytes(), from_cache=True)
        if exc.code in (404, 410):
            raise NotFound(f"{url}: HTTP {exc.code}") from exc
        raise FetchFailed(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchFailed(f"{url}: {reason}") from exc
    new_meta = {
        "url": url,
        "etag": headers.get("ETag", ""),
        "last_modified": headers.get("Last-Modified", ""),
    }
    if new_meta["etag"] or new_meta["last_modified"]:
        tmp = body_path.with_suffix(".tmp")
        tmp.write_bytes(body)
        tmp.replace(body_path)
        meta_path.write_text(json.dumps(new_meta), encoding="utf-8")
    return Fetched(url, body, from_cache=False)


def _read_file(url: str) -> Fetched:

    path = Path(unquote(urlparse(url).path))
    try:
        return Fetched(url, path.read_bytes(), from_cache=False)
    except FileNotFoundError as exc:
        raise NotFound(f"{url}: no such file") from exc
    except OSError as exc:
        raise FetchFailed(f"{url}: {exc.strerror}") from exc
