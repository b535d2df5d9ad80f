"""A metrics store that serves only the Prometheus query API (``GET /api/v1/query``), as
Amazon Managed Service for Prometheus and a Mimir query-frontend do, checking SigV4 and a
tenant header: the rollout's stores, for tests/fleet/test_prometheus_client.py
and the README rollout walk (tests/fleet/test_readme_rollout_walk.py)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QueryOnlyStore:
    """A store that serves only ``GET /api/v1/query`` (Amazon Managed Service for
    Prometheus's workspace endpoint, a Mimir query-frontend): 404 for anything else, 403
    unless the request is signed with AWS Signature Version 4 for ``aps`` by the known
    key (checked by recomputing the signature from what arrived: the canonical request
    of the documented algorithm, botocore's implementation) and, when ``org`` is set, 401
    without that ``X-Scope-OrgID``. ``answer(query)`` is the JSON document the store
    answers an accepted query with (the query API's documented format)."""

    KEY, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

    def __init__(self, *, sigv4: bool, answer: Callable[[str], Any], org: str = "") -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        self.seen: list[dict[str, str]] = []
        self.time = 0.0  # the latest query's evaluation time (one rollout's are all the same)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.startswith("/api/v1/query?"):
                    return self._answer(404, b"404 page not found")
                if org and self.headers.get("X-Scope-OrgID") != org:
                    return self._answer(401, b"no org id")
                if sigv4:
                    host = self.headers["Host"]
                    got = self.headers.get("Authorization", "")
                    names = got.partition("SignedHeaders=")[2].partition(",")[0].split(";")
                    signed = {k: v for k, v in self.headers.items() if k.lower() in names}
                    req = AWSRequest(method="GET", url=f"http://{host}{self.path}", headers=signed)
                    req.context["timestamp"] = self.headers.get("X-Amz-Date", "")
                    auth = SigV4Auth(Credentials(outer.KEY, outer.SECRET), "aps", "us-west-2")
                    canonical = auth.canonical_request(req)
                    want = auth.signature(auth.string_to_sign(req, canonical), req)
                    if not got.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") or (
                        f"Signature={want}" not in got
                    ):
                        return self._answer(403, b"signature does not match")
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                outer.time = float(query.get("time", ["0"])[0])  # the evaluation time asked
                self._answer(200, json.dumps(answer(query.get("query", [""])[0])).encode())

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
