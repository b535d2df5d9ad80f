"""Shared test fixtures and helpers.

- ``require_tool(name, extra_dirs=())``: the path of an external program (on PATH, next to
  the running Python, or in ``extra_dirs``); skips the test when it is missing, fails it
  instead when ``CI=true``. ``require(condition, reason)``: the same for any condition.
  Tests and fixtures can also take it as the fixture of the same name
  (``from conftest import ...`` is unreliable: every folder's conftest.py is imported
  under the same module name).
- ``require_url(url)`` / fixture ``reachable``: skip when a URL cannot be fetched, fail
  under CI=true.
- ``nvidia_repo``: `imagectl drift` reads tests/fixtures/nvidia-index instead of NVIDIA.
- ``_isolated_state`` (autouse): every test gets its own ``IMAGECTL_STATE_DIR`` and no
  ``IMAGECTL_DATABASE_URL`` / ``IMAGECTL_ACTOR`` from the caller's environment.
- ``cli``: run ``imagectl ARGS`` in-process through the real entry point.
- ``pytest_configure``: a suite started as a background job gets Python's SIGINT handler
  back (a background job starts with SIGINT ignored; its children would inherit it).
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
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Protocol fakes for the clouds (moto, Compute REST, ARM): aws_moto, moto_server,
# gcp_fake, azure_fake, cloud_env. See tests/fakes/__init__.py.
pytest_plugins = (
    ["tests.fakes.fixtures"] if (Path(__file__).parent / "fakes" / "fixtures.py").exists() else []
) + ["tests.xdist_groups"]  # --dist loadgroup's groups on pytest 9.2 (see the module)

from tests.support import (  # noqa: E402  (after pytest_plugins by design)
    REPO,
    CliResult,
    CliText,
    _require_module,
    require_tool,
    require_url,
)


def pytest_configure(config: pytest.Config) -> None:
    """A suite started as a shell's background job (``make test &``) starts with SIGINT
    ignored, and every child would inherit that: Python then installs no KeyboardInterrupt
    handler and a Ctrl-C test's child sleeps on. Put Python's own handler back, as a
    foreground start has it (each child a test signals also resets its dispositions:
    ``tests.support.default_signals``, ``tests/test_signal_children.py``)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(name="require_tool")
def _require_tool_fixture() -> Callable[..., str]:
    """The ``require_tool`` helper, for tests and fixtures in any folder."""
    return require_tool


@pytest.fixture
def reachable():
    """``reachable(url)``: skip (locally) or fail (CI=true) when ``url`` cannot be fetched."""
    return require_url


@pytest.fixture
def nvidia_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point `imagectl drift` at the fixture copies of NVIDIA's CUDA repository indexes."""
    fixtures = REPO / "tests" / "fixtures" / "nvidia-index"
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", fixtures.as_uri())
    return fixtures


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own state and cache dirs (catalog, plan files, the local base's
    debootstrap tree): nothing leaks into ~."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(state))
    monkeypatch.setenv("IMAGECTL_CACHE_DIR", str(tmp_path / "cache"))
    # The width commands lay text out at: 200, or IMAGECTL_TEST_COLUMNS (the suite at 60
    # columns: tests/test_cli_text_assertions.py); no colour forced from the caller.
    monkeypatch.setenv("COLUMNS", os.environ.get("IMAGECTL_TEST_COLUMNS", "200"))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("IMAGECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("IMAGECTL_ACTOR", raising=False)
    monkeypatch.delenv("IMAGECTL_ATTESTATION_SIGNER", raising=False)
    # The state folder's signing key, made as `imagectl attest --new-key` makes it, and
    # trusted explicitly (verifiers trust only a named file or the repository's anchor).
    monkeypatch.setenv("IMAGECTL_ATTESTATION_TRUST", str(_state_key(state)))
    return state


def _state_key(state: Path) -> Path:
    from securesystemslib.signer import CryptoSigner

    from imagectl.provenance.keys import trust_document

    keys = state / "keys"
    keys.mkdir(mode=0o700)
    signer = CryptoSigner.generate_ed25519()
    (keys / "attestation.pub.json").write_text(trust_document([signer.public_key]))
    pem = keys / "attestation.pem"
    pem.touch(mode=0o600)
    pem.write_bytes(signer.private_bytes)
    return keys / "attestation.pub.json"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``imagectl ARGS`` in-process through the real entry point."""
    from imagectl.cli import main

    def run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code=code, out=CliText(captured.out), err=CliText(captured.err))

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
    # -k below puts the server's socket in this folder: where its path fits (a long TMPDIR
    # does not hold .s.PGSQL.<port>: "Unix-domain socket path ... is too long")
    from imagectl.core.sockets import socket_base

    room = len("imagectl-pg-xxxxxxxx/.s.PGSQL.65535.lock")
    base = Path(tempfile.mkdtemp(prefix="imagectl-pg-", dir=socket_base(room)))
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
