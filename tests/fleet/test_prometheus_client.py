"""The rollout's Prometheus client (``imagectl.rollout.prom``) against a local HTTP server
speaking Prometheus's documented query API (``/api/v1/query``: ``status``, ``data``,
``resultType``, ``result``, ``warnings``; values as strings, "NaN"/"+Inf" included): URL
and auth from the environment only (bearer, basic, or the URL's user information, checked
by the server reading the headers, never printed), and every way an answer can be
unusable or hostile (unreachable, HTTP error, not JSON, an error status, the wrong result
type, a partial answer with warnings, a nesting 100,000 deep, a byte every few seconds, a
redirect to another host, a label with a newline, a value that is no number) is
"unavailable" or made inert, never a traceback or an empty, healthy-looking vector."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from imagectl.core.errors import UserError
from imagectl.rollout.prom import Prometheus, PrometheusUnavailable
from tests.fleet.query_store import QueryOnlyStore

OK = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"instance": "a:9100"}, "value": [1, "2"]}]}}  # fmt: skip


class _Server:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.reply: tuple[int, bytes] = (200, json.dumps(OK).encode())
        self.location = ""  # a redirect's target
        self.drip_s = 0.0  # a byte every drip_s seconds
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
                if outer.location and not self.path.startswith("/moved"):
                    self.send_response(302)
                    self.send_header("Location", outer.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                code, body = outer.reply
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if outer.drip_s:
                    for b in body:
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(outer.drip_s)
                    return
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


def _vector(*items: dict[str, Any], **extra: Any) -> bytes:
    doc = {"status": "success", "data": {"resultType": "vector", "result": list(items)}}
    return json.dumps({**doc, **extra}).encode()


def test_a_partial_answer_is_unavailable(server) -> None:
    """``warnings`` beside ``status: success`` (a remote-read store or a shard failed;
    Thanos's partial response): not the fleet."""
    server.reply = (200, _vector(OK["data"]["result"][0], warnings=["store 2 unreachable"]))
    with pytest.raises(PrometheusUnavailable, match="answered in part.*store 2 unreachable"):
        Prometheus(server.url, {}).query("up", 1.0)


def test_a_deep_answer_is_unavailable_not_a_recursion_error(server) -> None:
    server.reply = (200, b'{"status": "success", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(PrometheusUnavailable, match="nested 100001 levels deep"):
        Prometheus(server.url, {}).query("up", 1.0)


def test_a_dripping_server_ends_at_the_deadline(server) -> None:
    """A byte every 0.4 s: each read returns within the per-read timeout, so only the
    client's overall deadline bounds it."""
    server.reply, server.drip_s = (200, json.dumps(OK).encode()), 0.4
    t0 = time.monotonic()
    with pytest.raises(PrometheusUnavailable, match="within the 1.5 s deadline"):
        Prometheus(server.url, {}, timeout_s=1.0, deadline_s=1.5).query("up", 1.0)
    assert time.monotonic() - t0 < 4


def test_no_credentials_follow_a_redirect_to_another_origin(server, monkeypatch) -> None:
    other = _Server()
    try:
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", server.url)
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_TOKEN", "s3cret-token")
        server.location = other.url + "/api/v1/query?query=up"
        with pytest.raises(PrometheusUnavailable, match="redirected to another origin"):
            Prometheus.from_env().query("up", 1.0)
        assert other.seen == []  # never asked, so never given the token
        # within the same origin a redirect is followed, with the credentials
        server.location = server.url + "/moved/api/v1/query?query=up"
        assert Prometheus.from_env().query("up", 1.0)[0].value == 2.0
        assert server.seen[-1]["path"].startswith("/moved") and server.seen[-1]["auth"] == (
            "Bearer s3cret-token"
        )
    finally:
        other.httpd.shutdown()
        other.httpd.server_close()


def test_credentials_in_the_url_are_used_and_never_shown(server, monkeypatch) -> None:
    host = server.url.removeprefix("http://")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", f"http://ops:pa%40ss-w0rd@{host}/")
    prom = Prometheus.from_env()
    prom.query("up", 1.0)
    assert server.seen[-1]["auth"] == "Basic " + base64.b64encode(b"ops:pa@ss-w0rd").decode()
    assert "pa%40ss-w0rd" not in prom.url and "pa@ss" not in prom.url
    assert prom.shown == server.url and "ops" not in prom.url
    server.httpd.shutdown()
    server.httpd.server_close()
    with pytest.raises(PrometheusUnavailable) as caught:
        Prometheus.from_env(timeout_s=1).query("up", 1.0)
    assert "w0rd" not in str(caught.value) and host.split(":")[0] in str(caught.value)
    server.httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # teardown
    threading.Thread(target=server.httpd.serve_forever, args=(0.05,), daemon=True).start()


def test_label_values_are_made_inert(server) -> None:
    """A newline in a label cannot forge an "advance ..." line; escapes cannot reach a
    terminal."""
    forged = "p5.48xlarge\nadvance ami-evil: every shape ok\x1b[2K"
    server.reply = (200, _vector({"metric": {"shape": forged}, "value": [1, "1"]}))
    (sample,) = Prometheus(server.url, {}).query("up", 1.0)
    assert "\n" not in sample.labels["shape"] and "\x1b" not in sample.labels["shape"]
    assert sample.labels["shape"] == "p5.48xlarge advance ami-evil: every shape ok"


@pytest.mark.parametrize(
    "value", [["t", "1"], [1, 2], [1], "1", None, [1, "one"], [1, {"a": 1}]], ids=repr
)
def test_a_value_that_is_no_number_is_kept_as_unknown(server, value) -> None:
    """Kept (as NaN, its text beside it) so the node is quarantined, never dropped."""
    server.reply = (200, _vector({"metric": {"instance": "a"}, "value": value}))
    (sample,) = Prometheus(server.url, {}).query("up", 1.0)
    assert sample.value != sample.value and sample.raw is not None


def test_special_values_are_read_as_prometheus_writes_them(server) -> None:
    server.reply = (200, _vector(*({"metric": {"i": v}, "value": [1, v]}
                                   for v in ("NaN", "+Inf", "-Inf", "-1000", "1e9"))))  # fmt: skip
    got = [s.value for s in Prometheus(server.url, {}).query("up", 1.0)]
    assert got[1:] == [float("inf"), float("-inf"), -1000.0, 1e9] and got[0] != got[0]


def test_only_the_query_api_is_asked(server) -> None:
    """No status endpoint: a store that serves only /api/v1/query is enough."""
    Prometheus(server.url, {}).query("up", 1.0)
    assert {p["path"].split("?")[0] for p in server.seen} == {"/api/v1/query"}


def _QueryOnlyStore(*, sigv4: bool, org: str = "") -> QueryOnlyStore:
    """The query-only store (tests/fleet/query_store.py) answering every query with OK."""
    return QueryOnlyStore(sigv4=sigv4, org=org, answer=lambda query: OK)


def test_a_managed_prometheus_with_sigv4(monkeypatch) -> None:
    store = _QueryOnlyStore(sigv4=True)
    try:
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", store.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.SECRET)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_SIGV4_REGION", "us-west-2")
        (sample,) = Prometheus.from_env().query('max(up{job="a b"})', 100.0)
        assert sample.value == 2.0
        # a wrong key is refused by the store: unavailable, not zero
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-key")
        with pytest.raises(PrometheusUnavailable, match="HTTP 403"):
            Prometheus.from_env().query("up", 100.0)
        # unsigned: refused too
        monkeypatch.delenv("IMAGECTL_PROMETHEUS_SIGV4_REGION")
        with pytest.raises(PrometheusUnavailable, match="HTTP 403"):
            Prometheus.from_env().query("up", 100.0)
    finally:
        store.close()


def test_a_tenant_header_from_the_environment_or_a_file(monkeypatch, tmp_path) -> None:
    store = _QueryOnlyStore(sigv4=False, org="tenant-1")
    try:
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", store.url)
        with pytest.raises(PrometheusUnavailable, match="HTTP 401"):
            Prometheus.from_env().query("up", 1.0)
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_HEADERS", "X-Scope-OrgID: tenant-1")
        assert Prometheus.from_env().query("up", 1.0)[0].value == 2.0
        monkeypatch.delenv("IMAGECTL_PROMETHEUS_HEADERS")
        headers = tmp_path / "headers"
        headers.write_text("# Mimir\nX-Scope-OrgID: tenant-1\n")
        monkeypatch.setenv("IMAGECTL_PROMETHEUS_HEADERS_FILE", str(headers))
        assert Prometheus.from_env().query("up", 1.0)[0].value == 2.0
        assert store.seen[-1]["x-scope-orgid"] == "tenant-1"
    finally:
        store.close()


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("X-Scope-OrgID tenant-1", "Name: value"),
        ("Bad Name: x", "Name: value"),
        ("Authorization: Bearer x", "set by imagectl itself"),
        ("Host: evil.example", "set by imagectl itself"),
    ],
)
def test_a_bad_header_line_is_bad_input(monkeypatch, line: str, words: str) -> None:
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_HEADERS", line)
    with pytest.raises(UserError, match=words):
        Prometheus.from_env()


def test_two_ways_to_authenticate_are_bad_input(monkeypatch) -> None:
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_URL", "http://ops:pw@127.0.0.1:9")
    monkeypatch.setenv("IMAGECTL_PROMETHEUS_TOKEN", "t")
    with pytest.raises(UserError, match="more than one way"):
        Prometheus.from_env()
