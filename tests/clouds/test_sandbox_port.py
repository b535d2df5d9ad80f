"""The sandbox's port: a port in use is exit 2 within seconds, naming
the port (it waited forever: moto's server thread died alone); without ``--port`` the
sandbox picks a free port, prints it, and writes the environment to source in another
shell. 5000, moto's own default and the README's before, is macOS's AirPlay Receiver."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, default_signals, flat


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGECTL_", "AWS_"))}
    env.update(IMAGECTL_STATE_DIR=str(state), PYTHONUNBUFFERED="1")
    return env


def test_a_busy_port_is_exit_2_at_once_naming_it(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "imagectl.clouds.aws.sandbox", "--port", str(port)],
            cwd=REPO, env=_env(tmp_path / "state"), capture_output=True, text=True,
            timeout=60, preexec_fn=default_signals,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert time.monotonic() - started < 30
    assert f"port {port}" in flat(proc.stderr)
    assert "Traceback" not in flat(proc.stderr)
    assert "Leave --port out" in flat(proc.stderr)


def test_without_a_port_it_picks_a_free_one_and_prints_it(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "imagectl.clouds.aws.sandbox", "--stack", "h100-training"],
        cwd=REPO, env=_env(state), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, preexec_fn=default_signals,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("inventory override:"):
                break
            assert time.monotonic() < deadline, "".join(seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    text = "".join(seen)
    (served,) = [ln for ln in seen if ln.startswith("moto server on ")]
    port = int(served.split("(port ")[1].split(")")[0])
    assert port != 5000 and port > 0
    env_file = state / "sandbox" / "sandbox.env"
    assert f". {env_file}" in text
    assert f"IMAGECTL_AWS_ENDPOINT_URL=http://127.0.0.1:{port}" in env_file.read_text()
