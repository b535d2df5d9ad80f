"""A small client of Prometheus's HTTP API (``GET /api/v1/query``), configured only by
environment variables, never by argv (a token on a command line is in every process list
and shell history):

- ``IMAGECTL_PROMETHEUS_URL``: the server, e.g. ``https://prometheus.example:9090``;
- ``IMAGECTL_PROMETHEUS_TOKEN``: a bearer token, or ``IMAGECTL_PROMETHEUS_USER`` and
  ``IMAGECTL_PROMETHEUS_PASSWORD`` for basic auth (neither: no auth).

An unreachable server, an HTTP error or a query error raise ``PrometheusUnavailable``; the
rollout turns that into "hold", never into zero.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from imagectl.core.errors import UserError

URL_ENV = "IMAGECTL_PROMETHEUS_URL"
TOKEN_ENV = "IMAGECTL_PROMETHEUS_TOKEN"
USER_ENV = "IMAGECTL_PROMETHEUS_USER"
PASSWORD_ENV = "IMAGECTL_PROMETHEUS_PASSWORD"
MAX_BYTES = 256 * 1024 * 1024  # a 10,000-node answer is a few MB; refuse a runaway one


class PrometheusUnavailable(Exception):
    """The server could not answer (unreachable, HTTP error, query error)."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass
class Prometheus:
    url: str
    headers: dict[str, str]
    timeout_s: float = 30.0

    @classmethod
    def from_env(cls, timeout_s: float = 30.0) -> Prometheus:
        url = os.environ.get(URL_ENV, "").strip().rstrip("/")
        if not url:
            raise UserError(
                f"no Prometheus to read: {URL_ENV} is not set",
                hint=f"export {URL_ENV}=https://prometheus.example:9090 (and {TOKEN_ENV}, or "
                f"{USER_ENV} and {PASSWORD_ENV}, when it needs auth)",
            )
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise UserError(f"{URL_ENV}={url!r} is not an http(s) URL")
        headers = {"Accept": "application/json"}
        token = os.environ.get(TOKEN_ENV, "")
        user, password = os.environ.get(USER_ENV, ""), os.environ.get(PASSWORD_ENV, "")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif user:
            pair = base64.b64encode(f"{user}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {pair}"
        return cls(url, headers, timeout_s)

    def query(self, promql: str, at: float) -> list[Sample]:
        """An instant query's vector at Unix time ``at``."""
        params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
        return parse_vector(self._get(f"/api/v1/query?{params}"), self.url)

    def started_at(self) -> float:
        """When the server started (``/api/v1/status/runtimeinfo``'s ``startTime``): a
        server that started within a window has a gap in it (it was down before)."""
        try:
            doc: Any = json.loads(self._get("/api/v1/status/runtimeinfo"))
            text = str(doc["data"]["startTime"])
        except (ValueError, KeyError, TypeError):
            raise PrometheusUnavailable(f"{self.url} did not say when it started") from None
        try:
            return _rfc3339(text)
        except ValueError:
            raise PrometheusUnavailable(f"{self.url} started at {text!r}?") from None

    def _get(self, path: str) -> bytes:
        request = urllib.request.Request(f"{self.url}{path}", headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise PrometheusUnavailable(f"HTTP {exc.code} from {self.url}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PrometheusUnavailable(f"cannot reach {self.url}: {reason}") from None
        if len(body) > MAX_BYTES:
            raise PrometheusUnavailable(f"the answer from {self.url} is over {MAX_BYTES} bytes")
        return bytes(body)


def _rfc3339(text: str) -> float:
    """Prometheus's Go time (``2026-11-28T04:35:43.813920523Z``) as Unix seconds."""
    m = re.fullmatch(r"([0-9-]+T[0-9:]+)(?:\.([0-9]+))?(Z|[+-][0-9:]+)", text.strip())
    if m is None:
        raise ValueError(text)
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    stamp = dt.datetime.fromisoformat(m.group(1) + zone)
    return stamp.timestamp() + (float("0." + m.group(2)) if m.group(2) else 0.0)


def parse_vector(body: bytes, where: str) -> list[Sample]:
    try:
        doc: Any = json.loads(body)
    except ValueError:
        raise PrometheusUnavailable(f"{where} answered something that is not JSON") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        raise PrometheusUnavailable(f"query failed at {where}: {error or 'no success status'}")
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusUnavailable(f"{where} answered a {data.get('resultType')}, not a vector")
    out = []
    for item in data.get("result") or []:
        try:
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        out.append(Sample({str(k): str(v) for k, v in (item.get("metric") or {}).items()}, value))
    return out
