"""Index fetching over HTTP with validators: a nightly run does not re-download.

A loopback ``http.server`` serves the fixture repository, sends ``ETag`` and
``Last-Modified`` and answers ``304`` to matching ``If-None-Match`` /
``If-Modified-Since``; it counts full and not-modified responses.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from drift_helpers import kinds, stack_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-index"


class Counting(http.server.BaseHTTPRequestHandler):
    root: Path
    log: list[tuple[str, int]]

    def do_GET(self) -> None:
        path = self.root / self.path.lstrip("/")
        # log before answering: the client may send its next request as soon as it has
        # the answer
        if not path.is_file():
            self.log.append((self.path, 404))
            self.send_response(404)
            self.end_headers()
            return
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        modified = email.utils.formatdate(int(path.stat().st_mtime), usegmt=True)
        if self.headers.get("If-None-Match") == etag:
            self.log.append((self.path, 304))
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.log.append((self.path, 200))
        self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list]]:
    root = tmp_path / "repos"
    shutil.copytree(FIXTURES, root)
    log: list[tuple[str, int]] = []
    handler = type("H", (Counting,), {"root": root, "log": log})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", f"http://127.0.0.1:{server.server_port}")
    try:
        yield root, log
    finally:
        server.shutdown()
        server.server_close()


def run(cli, ws: Path):  # type: ignore[no-untyped-def]
    return cli(
        "--root",
        str(ws),
        "drift",
        "--upstream",
        "--stack",
        "h100-training",
        "--format",
        "json",
        "--as-of",
        "2026-11-01",
    )


def test_second_run_revalidates_and_reuses_the_cached_index(cli, workspace_copy, served):
    _root, log = served
    first = run(cli, workspace_copy)
    assert first.code == 1, first.err
    # Packages.gz does not exist for ubuntu2204 in the fixture: 404, then plain Packages
    index = "/ubuntu2204/x86_64/Packages"
    assert log[-1] == (index, 200)
    assert stack_report(first, "h100-training")["checked"][0]["from_cache"] == [False]

    log.clear()
    second = run(cli, workspace_copy)
    assert (index, 304) in log and (index, 200) not in log
    entry = stack_report(second, "h100-training")
    assert entry["checked"][0]["from_cache"] == [True]
    assert entry["findings"] == stack_report(first, "h100-training")["findings"]


def test_changed_index_is_downloaded_again(cli, workspace_copy, served):
    root, log = served
    run(cli, workspace_copy)
    packages = root / "ubuntu2204" / "x86_64" / "Packages"
    packages.write_text(
        packages.read_text()
        + "\nPackage: nvidia-fabricmanager-580\nVersion: 580.126.09-1\nArchitecture: amd64\n"
    )
    log.clear()
    result = run(cli, workspace_copy)
    assert ("/ubuntu2204/x86_64/Packages", 200) in log
    found = kinds(stack_report(result, "h100-training"))
    # the fabric manager for 580.126.09 is now published: the driver may move to it
    assert found["driver-newer"]["available"] == "580.126.09"
    assert "driver-without-fabric-manager" not in found


def test_unreachable_server_is_an_error_of_the_check(cli, workspace_copy, monkeypatch):
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", f"http://127.0.0.1:{port}")
    result = run(cli, workspace_copy)
    assert result.code == 1
    errors = [e for s in json.loads(result.out)["stacks"] for e in s["errors"]]
    assert errors and all(e["kind"] == "unreachable" for e in errors)
    assert "cannot read package index" in errors[0]["message"]
