"""An emulated fleet scraped by a real Prometheus (Debian's ``prometheus`` package).

- ``Exporters``: one small HTTP exporter per node on 127.0.0.1, each serving its node's
  textfile metrics at ``/metrics`` as node_exporter's textfile collector would (the boot
  unit's file and the watcher's, concatenated); the texts come from the real validator and
  watcher over replayed snapshots (``nodes.py``).
- ``PrometheusServer``: ``prometheus --config.file --storage.tsdb.path
  --web.listen-address=127.0.0.1:PORT`` scraping every exporter each second; ``stop()``
  ends it (the "Prometheus stopped mid-window" case).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support import default_signals

SCRAPE_S = 1


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.text.encode()  # type: ignore[attr-defined]
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Exporters:
    def __init__(self, texts: list[str]):
        self.servers: list[ThreadingHTTPServer] = []
        for text in texts:
            server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            server.text = text  # type: ignore[attr-defined]
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
            self.servers.append(server)

    @property
    def targets(self) -> list[str]:
        return [f"127.0.0.1:{s.server_address[1]}" for s in self.servers]

    def close(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    def __init__(self, binary: str, folder: Path, targets: list[str]):
        self.binary, self.folder, self.targets = binary, folder, targets
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(
            json.dumps(  # YAML is a superset of JSON
                {
                    "global": {"scrape_interval": f"{SCRAPE_S}s", "scrape_timeout": "900ms"},
                    "scrape_configs": [
                        {"job_name": "fleet", "static_configs": [{"targets": targets}]}
                    ],
                }
            )
        )
        self.started = time.time()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "prometheus.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=default_signals,
            )  # fmt: skip
        self._wait(lambda: self._get("/-/ready") is not None, 30, "ready")

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                return bytes(r.read())
        except OSError:
            return None

    def query(self, promql: str) -> list[dict[str, Any]]:
        body = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        return [] if body is None else list(json.loads(body)["data"]["result"])

    def _wait(self, ready: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prometheus not {what}: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def wait_scraped(self, nodes: int, scrapes: int = 2, timeout_s: float = 90) -> None:
        """Until every node's info series has ``scrapes`` samples."""

        def done() -> bool:
            got = self.query("count_over_time(imagectl_node_info[1m])")
            return len(got) == nodes and all(float(r["value"][1]) >= scrapes for r in got)

        self._wait(done, timeout_s, f"scraping {nodes} nodes")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
