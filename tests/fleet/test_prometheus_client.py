"""The rollout's Prometheus client (``imagectl.rollout.prom``): URL and auth from the
environment only (bearer or basic, checked by a real HTTP server reading the headers),
and every way an answer can be unusable (unreachable, HTTP error, not JSON, an error
status, a matrix) is "unavailable", never an empty, healthy-looking vector."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from imagectl.core.errors import UserError
from imagectl.rollout.prom import Prometheus, PrometheusUnavailable

OK = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"instance": "a:9100"}, "value": [1, "2"]}]}}  # fmt: skip


class _Server:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.reply: tuple[int, bytes] = (200, json.dumps(OK).encode())
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
                code, body = outer.reply
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_no_url_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMAGECTL_PROMETHEUS_URL", raising=False)
    with pytest.raises(UserError, match="IMAGECTL_PROMETHEUS_URL is not set"):
        Prometheus.from_env()
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", "file:///etc/passwd")
    with pytest.raises(UserError, match="not an http"):
        Prometheus.from_env()


def test_bearer_and_basic_auth_come_from_the_environment(server, monkeypatch) -> None:
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", server.url + "/")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_TOKEN", "t0ken")
    (sample,) = Prometheus.from_env().query("up", 100.0)
    assert (sample.labels, sample.value) == ({"instance": "a:9100"}, 2.0)
    assert server.seen[-1]["auth"] == "Bearer t0ken"
    assert "query=up" in server.seen[-1]["path"] and "time=100.000" in server.seen[-1]["path"]
    monkeypatch.delenv("IMAGECTL_PROMETHEUS_TOKEN")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_USER", "ops")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_PASSWORD", "pw")
    Prometheus.from_env().query("up", 100.0)
    assert server.seen[-1]["auth"] == "Basic " + base64.b64encode(b"ops:pw").decode()
    monkeypatch.delenv("IMAGECTL_PROMETHEUS_USER")
    Prometheus.from_env().query("up", 100.0)
    assert server.seen[-1]["auth"] is None


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        ((503, b"down"), "HTTP 503"),
        ((200, b"<html>"), "not JSON"),
        ((200, json.dumps({"status": "error", "error": "parse error"}).encode()), "parse error"),
        (
            (
                200,
                json.dumps(
                    {"status": "success", "data": {"resultType": "matrix", "result": []}}
                ).encode(),
            ),
            "matrix",
        ),
    ],
)
def test_an_unusable_answer_is_unavailable(server, reply, words: str) -> None:
    server.reply = reply
    with pytest.raises(PrometheusUnavailable, match=words):
        Prometheus(server.url, {}).query("up", 1.0)


def test_unreachable_is_unavailable(server) -> None:
    url = server.url
    server.httpd.shutdown()
    server.httpd.server_close()
    with pytest.raises(PrometheusUnavailable, match="cannot reach"):
        Prometheus(url, {}, timeout_s=2).query("up", 1.0)
    server.httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # for teardown
    threading.Thread(target=server.httpd.serve_forever, args=(0.05,), daemon=True).start()


def test_rollout_takes_no_url_or_secret_option(cli) -> None:
    r = cli("rollout", "--help")
    assert "--prometheus" not in r.out and "--token" not in r.out and "--url" not in r.out


def test_when_the_server_started(server) -> None:
    """``/api/v1/status/runtimeinfo``'s ``startTime`` (Go's RFC 3339 with nanoseconds):
    a server that started within the window holds the rollout."""
    doc = {"status": "success", "data": {"startTime": "2026-11-28T04:35:43.813920523Z"}}
    server.reply = (200, json.dumps(doc).encode())
    assert Prometheus(server.url, {}).started_at() == pytest.approx(1795840543.8139205)
    assert server.seen[-1]["path"] == "/api/v1/status/runtimeinfo"
    server.reply = (200, json.dumps({"status": "success", "data": {}}).encode())
    with pytest.raises(PrometheusUnavailable, match="did not say when it started"):
        Prometheus(server.url, {}).started_at()
