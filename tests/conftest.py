"""Shared test fixtures and helpers.

- ``cli``: run ``imagectl ARGS`` in-process; ``workspace_copy``: a writable copy of images/
  and playbooks/; ``require(cond, reason)`` / ``require_root()``: skip locally, fail in CI.

- ``require_tool(name, extra_dirs=())``: the path of an external program; skips the test
  when it is missing, fails it instead when ``CI=true``. Tests and fixtures get it as the
  fixture of the same name (``def test_x(require_tool): packer = require_tool("packer")``):
  ``from conftest import ...`` is unreliable because every folder's conftest.py is
  imported under the same module name.
- ``_isolated_state`` (autouse): every test gets its own ``IMAGECTL_STATE_DIR`` and no
  ``IMAGECTL_DATABASE_URL`` / ``IMAGECTL_ACTOR`` from the caller's environment.
- ``cli``: run ``imagectl ARGS`` in-process through the real entry point.
- ``workspace_copy``: a writable copy of images/ and playbooks/.
- ``postgres_server`` (session): a real PostgreSQL server started from Debian's binaries in
  a temporary data folder on 127.0.0.1 and a free port, stopped at the end of the session.
  As root it runs through ``runuser -u postgres --`` (PostgreSQL refuses to run as root).
- ``postgres_url``: a fresh, empty database on that server for one test (dropped after):
  a ``postgresql+psycopg://`` URL.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO
IN_CI = os.environ.get("CI", "").strip().lower() == "true"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def require(condition: bool, reason: str) -> None:
    """Skip locally / fail in CI when ``condition`` is false."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def require_root() -> None:
    require(os.geteuid() == 0, "root rights are needed (debootstrap / chroot)")


def require_tool(name: str, extra_dirs: Iterable[str] = ()) -> str:
    """Path of the program ``name`` (next to the running Python, on PATH or in
    ``extra_dirs``); skip if missing, fail if missing under CI=true."""
    for folder in (str(Path(sys.executable).parent), *extra_dirs):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    message = f"external tool '{name}' is not installed"
    if in_ci():
        pytest.fail(f"{message} (CI=true: missing tools are failures)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(name="require_tool")
def _require_tool_fixture() -> Callable[..., str]:
    """The ``require_tool`` helper, for tests and fixtures in any folder."""
    return require_tool


def _require_module(module: str, extra: str) -> None:
    try:
        __import__(module)
    except ImportError:
        message = f"Python module '{module}' is not installed (pip install 'imagectl[{extra}]')"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own state dir (catalog, plan files): nothing leaks into ~."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(state))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("IMAGECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("IMAGECTL_ACTOR", raising=False)
    return state


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``imagectl ARGS`` in-process through the real entry point."""
    from imagectl.cli import main

    def run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code=code, out=captured.out, err=captured.err)

    return run


@pytest.fixture
def workspace_copy(tmp_path: Path) -> Path:
    """A writable copy of the repository's images/ and playbooks/ to break on purpose."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / "images", root / "images")
    if (REPO / "playbooks").is_dir():
        shutil.copytree(REPO / "playbooks", root / "playbooks")
    return root


def postgres_bin_dirs() -> list[str]:
    """Where PostgreSQL's server programs live (pg_config --bindir, Debian's layout)."""
    dirs: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            )
            dirs.append(out.stdout.strip())
    dirs.extend(sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))
    return dirs


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    data_dir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def admin_dsn(self) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname=postgres"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    dirs = postgres_bin_dirs()
    initdb = require_tool("initdb", dirs)
    pg_ctl = require_tool("pg_ctl", dirs)
    _require_module("psycopg", "postgres")
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="imagectl-pg-"))
    if as_root:
        prefix = [require_tool("runuser"), "-u", "postgres", "--"]
        shutil.chown(base, user="postgres", group="postgres")
    data = base / "data"
    log = base / "server.log"
    port = _free_port()
    subprocess.run(
        [*prefix, initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
         "--no-sync", "--no-instructions"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    # A throw-away server: durability off for speed.
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c max_connections=100 "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    started = subprocess.run(
        [*prefix, pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60",
         "start"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if started.returncode != 0:
        server_log = log.read_text() if log.exists() else ""
        pytest.fail(f"PostgreSQL did not start: {started.stderr}\n{server_log}", pytrace=False)
    server = PostgresServer("127.0.0.1", port, "postgres", data)
    try:
        yield server
    finally:
        subprocess.run(
            [*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True, timeout=60,
        )  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh empty database for one test; dropped afterwards."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server.admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" STRATEGY FILE_COPY')
    try:
        yield postgres_server.url(name)
    finally:
        for _ in range(3):
            try:
                with psycopg.connect(postgres_server.admin_dsn(), autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg.OperationalError:
                time.sleep(0.2)
