"""The HTTP plumbing both cloud fakes share: a threaded stdlib server, a router, faults.

``FakeServer`` subclasses declare routes with ``self.route(METHOD, regex, handler)``; a
handler gets a ``Request`` and returns ``(status, body_dict, headers)``. Every request is
logged in ``self.requests`` (method, path, query) so tests can assert what the SDK sent.
Faults are ``Fault`` rules checked before routing: the first rule whose method and path
pattern match answers instead of the route, ``times`` times (``None``: forever).
``authorize`` (None: every caller may do everything) is asked first: given the request it
returns None to let it through or the cloud's refusal (``tests/fakes/permissions.py``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Response = tuple[int, Any, dict[str, str]]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    match: re.Match[str]


@dataclass
class Fault:
    method: str | None
    pattern: re.Pattern[str]
    respond: Callable[[Request], Response]
    times: int | None = 1
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and bool(self.pattern.search(path))


@dataclass
class Logged:
    method: str
    path: str
    query: dict[str, str]
    status: int = 0
    body: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    response: Any = None  # the JSON answered (contract tests check it)


class FakeServer:
    """Start with ``start()`` (or ``with``); ``endpoint`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Callable[[Request], Response]]] = []
        self.faults: list[Fault] = []
        self.requests: list[Logged] = []
        self.lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.authorize: Callable[[Request], Response | None] | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The headers and the body go out in two writes; with Nagle's algorithm on, the
            # second waits for the client's delayed ACK (~40 ms a response on Linux).
            # A cloud's front end answers at once: 48 ms a request before, under 1 ms now.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _handle(self) -> None:
                fake._dispatch(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- routing --------------------------------------------------------------------------
    def route(
        self,
        method: str,
        pattern: str,
        handler: Callable[[Request], Response],
        *,
        first: bool = False,
    ) -> None:
        """Add a route (``first``: before every route already added)."""
        entry = (method, re.compile(f"^{pattern}$"), handler)
        if first:
            self._routes.insert(0, entry)
        else:
            self._routes.append(entry)

    def add_fault(
        self,
        respond: Callable[[Request], Response],
        *,
        method: str | None = None,
        path: str = "",
        times: int | None = 1,
    ) -> Fault:
        fault = Fault(method, re.compile(path), respond, times)
        with self.lock:
            self.faults.append(fault)
        return fault

    def calls(self, method: str | None = None, path: str = "") -> list[Logged]:
        pattern = re.compile(path)
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and pattern.search(r.path)
        ]

    def _dispatch(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        method = handler.command
        path = parts.path
        logged = Logged(method, path, query, body=body)
        status, payload, headers = 404, self.not_found(path), {}
        dummy = re.match("", "")
        assert dummy is not None
        refusal = None
        with self.lock:
            self.requests.append(logged)
            if self.authorize is not None:  # a refused call reaches no fault and no route
                refusal = self.authorize(
                    Request(method, path, query, body, dict(handler.headers), dummy)
                )
            fault = None
            if refusal is None:
                fault = next((f for f in self.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.hits += 1
        try:
            if refusal is not None:
                status, payload, headers = refusal
            elif fault is not None:
                status, payload, headers = fault.respond(
                    Request(method, path, query, body, dict(handler.headers), dummy)
                )
            else:
                for m, pattern, func in self._routes:
                    match = pattern.match(path)
                    if m == method and match:
                        with self.lock:
                            status, payload, headers = func(
                                Request(method, path, query, body, dict(handler.headers), match)
                            )
                        break
        except Exception as exc:  # a bug in the fake: make it loud in the test
            status, payload, headers = 500, self.server_error(repr(exc)), {}
        logged.status = status
        data = b"" if payload is None else json.dumps(payload).encode()
        logged.response = json.loads(data) if data else None
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)

    # Subclasses answer in their cloud's error format.
    def not_found(self, path: str) -> Any:
        return {"error": {"code": 404, "message": f"{path} not found"}}

    def server_error(self, detail: str) -> Any:
        return {"error": {"code": 500, "message": detail}}
