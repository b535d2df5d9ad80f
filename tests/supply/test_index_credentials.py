"""Credentials in a package index URL stay secret: pip gets the index
through its environment, never its argv (every user reads ``/proc/PID/cmdline``), and a
failure's message shows the URL redacted.

The index is the tiny one served over HTTP behind basic auth. While pip downloads, the
server reads every process's command line: the password must be in none.
"""

from __future__ import annotations

import base64
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from imagectl.core.errors import UserError
from imagectl.supply.lock import LockSpec, write_lock
from imagectl.supply.wheelhouse import ensure_wheelhouse, tarball_wheels
from tests.supply.tiny_wheels import tiny_index

PLATFORMS = ("manylinux2014_x86_64",)
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
USER, PASSWORD = "ci", "s3cret-Pw-0xDEAD"


def _cmdlines() -> list[str]:
    found = []
    for proc in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(proc.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            continue
    return found


class Index(SimpleHTTPRequestHandler):
    """The tiny index behind basic auth; records whether a secret was on any argv."""

    seen: list[str]
    authorized: list[bool]

    def do_GET(self) -> None:
        self.seen.extend(c for c in _cmdlines() if PASSWORD in c)
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.end_headers()
            return
        self.authorized.append(True)
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def served(tmp_path: Path):
    file_url = tiny_index(tmp_path / "tiny")
    lock = write_lock(LockSpec(
        path=tmp_path / "tiny.lock", title="tiny", command="test", requirements=("alpha>=0.5",),
        index_url=file_url, pythons=(PY,), platforms=PLATFORMS,
    ))  # fmt: skip
    handler = type("Handler", (Index,), {"seen": [], "authorized": []})
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(tmp_path / "tiny" / "index"))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield lock, server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


def test_pip_gets_the_index_credentials_through_its_environment(served, tmp_path) -> None:
    lock, port, handler = served
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/"
    tarball = ensure_wheelhouse(
        lock, python=PY, platforms=PLATFORMS, folder=tmp_path / "cache", index_url=url
    )
    assert tarball_wheels(tarball) == ["alpha-1.0-py3-none-any.whl", "beta-2.1-py3-none-any.whl"]
    assert handler.authorized, "pip never authenticated: the credentials did not reach it"
    assert handler.seen == [], handler.seen  # on no process's argv while pip ran


def test_a_failed_download_names_the_index_without_its_secrets(served, tmp_path) -> None:
    lock, port, handler = served
    url = f"http://{USER}:wrong-{PASSWORD}@127.0.0.1:{port}/"
    with pytest.raises(UserError) as err:
        ensure_wheelhouse(
            lock, python=PY, platforms=PLATFORMS, folder=tmp_path / "cache", index_url=url
        )
    message = err.value.render()
    assert "downloading the wheels pinned in" in message
    assert PASSWORD not in message and f"{USER}:***@127.0.0.1" in message, message
    assert handler.seen == [], handler.seen
