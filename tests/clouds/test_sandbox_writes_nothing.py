"""The docs' AWS try-it sandbox (docs/sandbox.md) writes nothing into the checkout.

``python -m imagectl.clouds.aws.sandbox --port P --stack h100-training`` is started as the
page starts it, from the checkout; its inventory override (``sandbox-replay.yaml``) and
the empty hygiene root it names go to the state folder, not the current folder. The
"checkout" here is a copy of what the sandbox reads (images/ and the healthy snapshot), so
that anything written into it is seen, whatever else runs in the real one."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support import default_signals

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = Path("tests/snapshots/healthy/h100-sxm-8x.json")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_the_sandbox_writes_nothing_into_the_checkout(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "images", checkout / "images")
    (checkout / SNAPSHOT).parent.mkdir(parents=True)
    shutil.copy(REPO / SNAPSHOT, checkout / SNAPSHOT)
    before = _files(checkout)
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGECTL_", "AWS_"))}
    env.update(IMAGECTL_STATE_DIR=str(state), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "imagectl.clouds.aws.sandbox", "--port", str(_free_port()),
         "--stack", "h100-training"],
        cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=default_signals,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    override = None
    deadline = time.monotonic() + 90
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("inventory override:"):
                override = Path(line.split(":", 1)[1].strip())
                break
            assert time.monotonic() < deadline, "".join(seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert override is not None, "".join(seen)
    assert _files(checkout) == before  # nothing written into the checkout
    assert override.is_relative_to(state) and override.is_file()
    doc = yaml.safe_load(override.read_text())
    assert Path(doc["default_slot"]["validate_snapshot"]) == (checkout / SNAPSHOT).resolve()
    assert Path(doc["all"]["validate_hygiene_root"]).is_relative_to(state)
