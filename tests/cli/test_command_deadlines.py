"""Whole-command deadlines: against an endpoint that accepts a
connection and never answers, ``reap``, ``drift``, ``doctor``, ``promote`` and
``validate-image`` each exit 1 within their deadline, naming the call they waited on.

The endpoint is a listening socket that accepts and reads but never writes (the case
where per-call timeouts and retries together hold a command for many minutes). Every
cloud call of the AWS provider goes to it (``IMAGECTL_AWS_ENDPOINT_URL``); the commands
run as the user runs them, in a process of their own.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO, flat

IMAGECTL = str(Path(sys.executable).with_name("imagectl"))
# Long enough that a command reaches its first cloud call on a loaded machine (at 4 s,
# drift was still creating its boto3 client, loading botocore's EC2 model, beside a busy
# suite), short enough for five commands.
DEADLINE_S = 10.0
AMI = "ami-0123456789abcdef0"


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """http://127.0.0.1:PORT that accepts, reads and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # kept open, never written to

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


def _env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
        "IMAGECTL_AWS_ENDPOINT_URL": endpoint,
        "IMAGECTL_STATE_DIR": str(tmp_path / "state"),
        "IMAGECTL_CACHE_DIR": str(tmp_path / "cache"),
        "IMAGECTL_DATABASE_URL": f"sqlite:///{tmp_path / 'catalog.db'}",
        "IMAGECTL_DEADLINE_GRACE_S": "3",
        "NO_COLOR": "1", "COLUMNS": "400",
    }  # fmt: skip


def _seed_validated(tmp_path: Path) -> None:
    """A validated AWS image in the catalog, for promote to resolve before its first call."""
    from imagectl.catalog import repository as repo
    from imagectl.catalog.db import open_catalog

    catalog = open_catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    try:
        with catalog.transaction() as s:
            build = repo.record_build(s, build_id="b-1", stack="h100-training",
                                      stack_digest="d" * 64, cloud="aws")  # fmt: skip
            row = repo.record_image(s, build=build, cloud_image_id=AMI, region="us-east-1")
            repo.set_state(s, row, "validating", reason="test")
            repo.set_state(s, row, "validated", reason="test")
    finally:
        catalog.close()


# each command as the user types it (in the parametrize table, where
# tests/cli/test_every_option.py's walk finds the command with the --deadline below)
@pytest.mark.parametrize(
    "name, argv",
    [
        ("doctor", ["doctor", "--cloud", "aws", "--stack", "h100-training"]),
        ("drift", ["drift", "--stack", "h100-training", "--fleet"]),
        ("promote", ["promote", AMI, "--stack", "h100-training", "--cloud", "aws"]),
        ("reap", ["reap", "--cloud", "aws", "--stack", "h100-training"]),
        (
            "validate-image",
            ["validate-image", AMI, "--cloud", "aws", "--stack", "h100-training",
             "--runner-cidr", "203.0.113.7/32"],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)  # fmt: skip
def test_each_command_ends_by_its_deadline_naming_the_call(
    name: str, argv: list[str], tmp_path: Path, silent_endpoint: str
) -> None:
    if name == "promote":
        _seed_validated(tmp_path)
    started = time.monotonic()
    proc = subprocess.run(
        [IMAGECTL, *argv, "--deadline", str(DEADLINE_S)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env=_env(tmp_path, silent_endpoint),
    )  # fmt: skip
    took = time.monotonic() - started
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"ran past its deadline of {DEADLINE_S:g} s" in err, proc.stderr
    assert f"waiting on POST {silent_endpoint}/" in err, proc.stderr  # the call, named
    assert "Traceback" not in flat(proc.stderr)
    # the deadline, the interpreter's start and the grace the unwinding may take
    assert took < DEADLINE_S + 3 + 10, took


def test_the_deadline_option_and_its_default_are_shown() -> None:
    proc = subprocess.run([IMAGECTL, "reap", "--help"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert "--deadline" in flat(proc.stdout) and "default 900" in flat(proc.stdout)
