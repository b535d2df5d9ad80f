"""Whatever the endpoint answers, `imagectl doctor` prints findings, never a traceback: an
answer the SDK cannot parse (here an HTML page for every request) is one blocker naming
the call, on each cloud."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clouds.test_doctor import RUNNER, STACK, own_ids
from tests.fakes.fixtures import FAKE_AWS


class _Garbage(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        body = b"<html>this is not a cloud API"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def garbage() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    ("cloud", "variable", "call"),
    [
        ("aws", "IMAGECTL_AWS_ENDPOINT_URL", "STS GetCallerIdentity failed"),
        ("gcp", "IMAGECTL_GCP_ENDPOINT", "cannot ask Google Cloud"),
        ("azure", "IMAGECTL_AZURE_ENDPOINT", "cannot ask Azure"),
    ],
)
def test_an_unparsable_answer_is_one_blocker_not_a_traceback(
    cli: Any, workspace_copy: Path, monkeypatch: pytest.MonkeyPatch, garbage: str,
    cloud: str, variable: str, call: str,
) -> None:  # fmt: skip
    own_ids(workspace_copy)
    for key, value in FAKE_AWS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(variable, garbage)
    result = cli("--root", str(workspace_copy), "doctor", "--stack", STACK, "--cloud", cloud,
                 "--runner-cidr", RUNNER)  # fmt: skip
    out = result.out + result.err
    assert "Traceback" not in out
    assert result.code == 1, out
    assert [ln for ln in result.out.splitlines() if ln.startswith("blocker") and call in ln], out
