"""A small client of Prometheus's HTTP query API (``GET /api/v1/query``), configured only
by environment variables, never by argv (a token on a command line is in every process
list and shell history):

- ``IMAGECTL_PROMETHEUS_URL``: the server, e.g. ``https://prometheus.example:9090``; user
  information in it (``https://user:pw@host``) is basic auth, taken out of the URL;
- ``IMAGECTL_PROMETHEUS_TOKEN``: a bearer token, or ``IMAGECTL_PROMETHEUS_USER`` and
  ``IMAGECTL_PROMETHEUS_PASSWORD`` for basic auth (none: no auth);
- ``IMAGECTL_PROMETHEUS_SIGV4_REGION``: sign every request with AWS Signature Version 4
  (botocore's signer, the default credential chain; service ``aps``, Amazon Managed
  Service for Prometheus, or ``IMAGECTL_PROMETHEUS_SIGV4_SERVICE``);
- ``IMAGECTL_PROMETHEUS_HEADERS`` (lines ``Name: value``) and
  ``IMAGECTL_PROMETHEUS_HEADERS_FILE`` (a file of such lines): headers sent with every
  request, e.g. ``X-Scope-OrgID: tenant-1`` for a multi-tenant Mimir or Cortex. Their
  values are never printed.

Only the query API is used: a store that serves nothing else (a managed Prometheus, Mimir,
Thanos Query) is enough.

What it trusts of an answer, and what not:

- the body is read within ``MAX_BYTES`` and an overall deadline (``deadline_s`` from the
  client's creation: a server that sends a byte every few seconds cannot hold it longer),
  and parsed by the bounded reader (``imagectl.core.boundedjson``: a nesting limit, no
  RecursionError);
- ``status`` must be ``success``; ``warnings`` in an answer (a remote-read store or a
  shard failed: Prometheus HTTP API, "Format overview"; Thanos's partial response) make
  it ``PrometheusUnavailable``: half a fleet is not the fleet;
- redirects are followed only to the same origin (scheme, host, port): a redirect to
  another host never receives the credentials, and is refused;
- every label name and value goes through the one sanitizer (``safetext.one_line``):
  nothing a host wrote can add a line to the output;
- the URL is shown and stored only redacted (``imagectl.redact.redact_url``), and the
  credentials are never part of it.

An unreachable server, an HTTP error, a query error or an unusable answer raise
``PrometheusUnavailable``; the rollout turns that into "hold", never into zero.
"""

from __future__ import annotations

import base64
import math
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPMessage
from pathlib import Path
from typing import IO, NamedTuple

from imagectl.core.boundedjson import parse_bounded
from imagectl.core.errors import UserError
from imagectl.core.safetext import one_line
from imagectl.redact import redact_url

URL_ENV = "IMAGECTL_PROMETHEUS_URL"
TOKEN_ENV = "IMAGECTL_PROMETHEUS_TOKEN"
USER_ENV = "IMAGECTL_PROMETHEUS_USER"
PASSWORD_ENV = "IMAGECTL_PROMETHEUS_PASSWORD"
SIGV4_REGION_ENV = "IMAGECTL_PROMETHEUS_SIGV4_REGION"
SIGV4_SERVICE_ENV = "IMAGECTL_PROMETHEUS_SIGV4_SERVICE"
HEADERS_ENV = "IMAGECTL_PROMETHEUS_HEADERS"
HEADERS_FILE_ENV = "IMAGECTL_PROMETHEUS_HEADERS_FILE"
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 field-name
RESERVED = {"host", "content-length", "authorization", "x-amz-date", "x-amz-security-token"}
MAX_BYTES = 256 * 1024 * 1024  # a 10,000-node answer is a few MB; refuse a runaway one
MAX_DEPTH = 8  # {"data": {"result": [{"metric": {...}, "values": [[t, v]]}]}}: 6 deep
CHUNK = 1 << 16
MAX_LABEL = 1024  # a label value longer than this is cut (and cannot be an identity)


class PrometheusUnavailable(Exception):
    """The server could not answer (unreachable, HTTP error, query error, partial)."""


class Sample(NamedTuple):
    """One series of an instant vector: its labels, value and Prometheus's timestamp.
    ``raw`` is the value as sent when it was not a number (``value`` is then NaN). A
    tuple: 10,000 nodes make tens of thousands of them."""

    labels: dict[str, str]
    value: float
    at: float = 0.0
    raw: str | None = None


@dataclass(frozen=True)
class Series:
    """One series of a range vector (a matrix): its samples as (time, value)."""

    labels: dict[str, str]
    points: list[tuple[float, float]]
    bad: int = 0  # samples whose value or time was not a number


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the origin the request went to."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            raise PrometheusUnavailable(
                f"the server redirected to another origin ({redact_url(newurl)}): refused, "
                "so the credentials never leave for it"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@dataclass
class Prometheus:
    url: str  # without user information
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    deadline_s: float = 300.0  # the whole client's life: every query within it
    started: float = field(default_factory=time.monotonic)
    sigv4: tuple[str, str] | None = None  # (region, service): sign each request

    @property
    def shown(self) -> str:
        """The URL as it may be printed or stored."""
        return redact_url(self.url)

    @classmethod
    def from_env(cls, timeout_s: float = 30.0, deadline_s: float = 300.0) -> Prometheus:
        raw = os.environ.get(URL_ENV, "").strip().rstrip("/")
        if not raw:
            raise UserError(
                f"no Prometheus to read: {URL_ENV} is not set",
                hint=f"export {URL_ENV}=https://prometheus.example:9090 (and {TOKEN_ENV}, or "
                f"{USER_ENV} and {PASSWORD_ENV}, when it needs auth)",
            )
        parts = urllib.parse.urlsplit(raw)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"{URL_ENV}={redact_url(raw)!r} is not an http(s) URL")
        url_user = urllib.parse.unquote(parts.username or "")
        url_password = urllib.parse.unquote(parts.password or "")
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port:
            netloc += f":{parts.port}"
        url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        headers = {"Accept": "application/json"}
        token = os.environ.get(TOKEN_ENV, "")
        user = os.environ.get(USER_ENV, "") or url_user
        password = os.environ.get(PASSWORD_ENV, "") or url_password
        region = os.environ.get(SIGV4_REGION_ENV, "").strip()
        if sum(map(bool, (token, user, region))) > 1:
            raise UserError(
                f"more than one way to authenticate to Prometheus is set ({TOKEN_ENV}, "
                f"{USER_ENV} or user information in {URL_ENV}, {SIGV4_REGION_ENV})",
                hint="Set one of them",
            )
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif user:
            pair = base64.b64encode(f"{user}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {pair}"
        headers.update(_extra_headers())
        sigv4 = None
        if region:
            sigv4 = (region, os.environ.get(SIGV4_SERVICE_ENV, "").strip() or "aps")
        return cls(url.rstrip("/"), headers, timeout_s, deadline_s, sigv4=sigv4)

    def query(self, promql: str, at: float) -> list[Sample]:
        """An instant query's vector at Unix time ``at``."""
        return parse_vector(self._get(promql, at), self.shown)

    def query_range_vector(self, promql: str, at: float) -> list[Series]:
        """An instant query of a range selector (``x[600s]``): the raw samples, a matrix."""
        return parse_matrix(self._get(promql, at), self.shown)

    def _left(self) -> float:
        left = self.deadline_s - (time.monotonic() - self.started)
        if left <= 0.1:
            raise PrometheusUnavailable(
                f"{self.shown} did not answer within the {self.deadline_s:g} s deadline"
            )
        return left

    def _get(self, promql: str, at: float) -> bytes:
        params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
        full = f"{self.url}/api/v1/query?{params}"
        headers = dict(self.headers)
        if self.sigv4 is not None:
            headers.update(_signed(full, headers, *self.sigv4))
        request = urllib.request.Request(full, headers=headers)
        opener = urllib.request.build_opener(_SameOrigin)
        try:
            with opener.open(request, timeout=min(self.timeout_s, self._left())) as response:
                chunks, size = [], 0
                while True:
                    left = self._left()
                    sock = _socket_of(response)
                    if sock is not None:
                        sock.settimeout(min(self.timeout_s, left))
                    chunk = response.read1(CHUNK) if hasattr(response, "read1") else b""
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_BYTES:
                        raise PrometheusUnavailable(
                            f"the answer from {self.shown} is over {MAX_BYTES} bytes"
                        )
        except urllib.error.HTTPError as exc:
            raise PrometheusUnavailable(f"HTTP {exc.code} from {self.shown}") from None
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() - self.started >= self.deadline_s - 0.1:
                self._left()  # the deadline cut the read short: say so
            reason = getattr(exc, "reason", exc)
            raise PrometheusUnavailable(f"cannot reach {self.shown}: {one_line(reason)}") from None
        self._left()
        return b"".join(chunks)


def _extra_headers() -> dict[str, str]:
    """``Name: value`` lines from the environment and the headers file (checked: a field
    name, no line break, none of the headers the client sets itself)."""
    lines: list[tuple[str, str]] = []
    raw = os.environ.get(HEADERS_ENV, "")
    lines += [(HEADERS_ENV, line) for line in raw.splitlines()]
    path = os.environ.get(HEADERS_FILE_ENV, "").strip()
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{HEADERS_FILE_ENV}={path}: cannot read it ({exc})") from None
        lines += [(f"{path}:{i}", line) for i, line in enumerate(text.splitlines(), 1)]
    out: dict[str, str] = {}
    for where, line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _TOKEN.match(name) or not value.isprintable():
            raise UserError(
                f"{where}: a header line is `Name: value` (a field name, then printable text)",
                hint="e.g. X-Scope-OrgID: tenant-1",
            )
        if name.lower() in RESERVED:
            raise UserError(
                f"{where}: {name} is set by imagectl itself (auth by {TOKEN_ENV}, {USER_ENV} "
                f"or {SIGV4_REGION_ENV})"
            )
        out[name] = value
    return out


def _signed(url: str, headers: dict[str, str], region: str, service: str) -> dict[str, str]:
    """The AWS Signature Version 4 headers for a GET of ``url`` (botocore's signer, the
    default credential chain: environment, profile, instance role)."""
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        raise PrometheusUnavailable(
            f"{SIGV4_REGION_ENV} is set but no AWS credentials were found (environment, "
            "profile or instance role)"
        )
    request = AWSRequest(method="GET", url=url, headers=dict(headers))
    SigV4Auth(credentials, service, region).add_auth(request)
    return {k: str(v) for k, v in request.headers.items()}


def _socket_of(response: object) -> socket.socket | None:
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _clean(value: object) -> str:
    """``safetext.one_line(value)``, cut at ``MAX_LABEL``; printable ASCII without a run
    of spaces is already what one_line makes of it (the fast path of 10,000 nodes)."""
    if (
        isinstance(value, str)
        and value.isascii()
        and value.isprintable()
        and "  " not in value
        and value[:1] != " "
        and value[-1:] != " "
    ):
        return value[:MAX_LABEL]
    return one_line(value)[:MAX_LABEL]


def _labels(metric: object, inert: bool = False) -> dict[str, str]:
    """The labels made inert; ``inert``: the whole answer was printable ASCII without an
    escape (``_inert``), so every string in it already is what ``_clean`` makes of it."""
    if not isinstance(metric, dict):
        return {}
    if inert and all(isinstance(v, str) and len(v) <= MAX_LABEL for v in metric.values()):
        return metric
    return {_clean(k): _clean(v) for k, v in metric.items()}


def _inert(body: bytes) -> bool:
    """No string in this JSON can hold a control character, an escape sequence or a bidi
    control: ASCII, no backslash (JSON's only way to write a control character), no DEL.
    (Such strings can still hold spaces; one_line would only collapse them.)"""
    return body.isascii() and b"\\" not in body and b"\x7f" not in body


def _number(value: object) -> float:
    """A sample's value as Prometheus sends it (a string: "1", "NaN", "+Inf"); anything
    else is ValueError."""
    if not isinstance(value, str):
        raise ValueError(value)
    return float(value)


def _document(body: bytes, where: str, kind: str) -> list[object]:
    try:
        doc = parse_bounded(
            body, kind="Prometheus answer", where=where, hint="", max_bytes=MAX_BYTES,
            max_depth=MAX_DEPTH,
        )  # fmt: skip
    except UserError as exc:
        raise PrometheusUnavailable(f"{where} answered something unusable: {exc}") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        raise PrometheusUnavailable(
            f"query failed at {where}: {one_line(error or 'no success status')[:300]}"
        )
    warnings = doc.get("warnings")
    if warnings:
        shown = "; ".join(one_line(w)[:200] for w in warnings[:3]) if isinstance(
            warnings, list) else one_line(warnings)[:200]  # fmt: skip
        raise PrometheusUnavailable(
            f"{where} answered in part (warnings: {shown}): a partial answer is not the fleet"
        )
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != kind:
        got = data.get("resultType") if isinstance(data, dict) else None
        raise PrometheusUnavailable(f"{where} answered a {one_line(got)}, not a {kind}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusUnavailable(f"{where} answered a {kind} without a result list")
    return result


def parse_vector(body: bytes, where: str) -> list[Sample]:
    out = []
    inert = _inert(body)
    for item in _document(body, where, "vector"):
        if not isinstance(item, dict):
            raise PrometheusUnavailable(f"{where} answered a vector item that is no object")
        labels = _labels(item.get("metric"), inert)
        pair = item.get("value")
        at, raw = 0.0, None
        try:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError(pair)
            value = _number(pair[1])
            at = float(pair[0])
        except (TypeError, ValueError):
            value = math.nan
            raw = one_line(pair)[:80]
        out.append(Sample(labels, value, at, raw))
    return out


def parse_matrix(body: bytes, where: str) -> list[Series]:
    out = []
    for item in _document(body, where, "matrix"):
        if not isinstance(item, dict):
            raise PrometheusUnavailable(f"{where} answered a matrix item that is no object")
        points, bad = [], 0
        values = item.get("values")
        for pair in values if isinstance(values, list) else []:
            try:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ValueError(pair)
                points.append((float(pair[0]), _number(pair[1])))
            except (TypeError, ValueError):
                bad += 1
        if not isinstance(values, list):
            bad += 1
        out.append(Series(_labels(item.get("metric")), sorted(points), bad))
    return out
