"""Promotion locks across real OS processes (multiprocessing, spawn), on SQLite and
PostgreSQL: one process holds, another waits then fails; never two inside at once."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.db import Catalog, open_catalog
from imagectl.catalog.locks import PromotionLocked, advisory_key, lock_name, promotion_lock
from imagectl.catalog.models import Lock, utcnow
from imagectl.core.errors import EXIT_FAILED

# The workers live in a plain module next to this file; the children import it by name.
sys.path.insert(0, str(Path(__file__).parent))
from lock_workers import CLOUD, STACK, TIMEOUT, _contend, _hold, _hold_and_die, _open, _try


def _forkserver_socket_folder() -> None:
    """The forkserver listens on a unix socket in multiprocessing's temporary folder
    (``pymp-*`` under TMPDIR); under a long TMPDIR its path does not fit ("AF_UNIX path
    too long"). Python 3.13 moves that folder to /tmp itself; on 3.10-3.12 this process's
    folder is set where the socket fits (the same ``tempdir`` key multiprocessing.util
    reads and fills)."""
    import atexit
    import shutil
    import tempfile
    from multiprocessing import process

    from imagectl.core.sockets import socket_base

    room = len("pymp-xxxxxxxx/listener-xxxxxxxx")
    base = socket_base(room)
    if base != tempfile.gettempdir():
        folder = tempfile.mkdtemp(prefix="pymp-", dir=base)
        atexit.register(shutil.rmtree, folder, True)
        process.current_process()._config["tempdir"] = folder  # type: ignore[attr-defined]


_forkserver_socket_folder()
# forkserver: every child is a fresh process forked from a server that has already
# imported SQLAlchemy, psycopg and the catalog once (spawn would re-import them per child).
CTX = mp.get_context("forkserver")
CTX.set_forkserver_preload(
    [
        "lock_workers",
        "psycopg",
        "sqlalchemy.dialects.postgresql",
        "alembic.script",
        "alembic.runtime.migration",
    ]
)


# --- helpers ---


def _start(target: Any, *args: Any) -> Any:
    proc = CTX.Process(target=target, args=args, daemon=True)
    proc.start()
    return proc


def _join(*procs: Any) -> None:
    for proc in procs:
        proc.join(TIMEOUT)
        assert proc.exitcode == 0, f"child {proc.pid} exited with {proc.exitcode}"


@pytest.fixture
def migrated(catalog: Catalog, catalog_url: str) -> str:
    """The URL of a catalog whose schema exists before the children open it."""
    return catalog_url


# --- tests ---


def test_second_process_waits_then_fails(migrated: str) -> None:
    queue, release = CTX.Queue(), CTX.Event()
    holder = _start(_hold, migrated, queue, release, None)
    kind, holder_pid, _ = queue.get(timeout=TIMEOUT)
    assert kind == "acquired"
    contender = _start(_try, migrated, queue, 1.0)
    kind, message, waited, code = queue.get(timeout=TIMEOUT)
    _join(contender)
    assert kind == "locked"
    assert waited >= 0.9
    assert code == EXIT_FAILED
    assert (
        f"promotion of stack {STACK} on cloud {CLOUD} is already running "
        f"(pid {holder_pid} on host {socket.gethostname()} since "
    ) in message
    release.set()
    assert queue.get(timeout=TIMEOUT)[0] == "releasing"
    _join(holder)
    after = _start(_try, migrated, queue, 0.0)
    assert queue.get(timeout=TIMEOUT)[0] == "acquired"
    _join(after)


def test_waiting_process_gets_the_lock_once_released(migrated: str) -> None:
    queue, release = CTX.Queue(), CTX.Event()
    holder = _start(_hold, migrated, queue, release, 1.5)
    assert queue.get(timeout=TIMEOUT)[0] == "acquired"
    waiter = _start(_try, migrated, queue, 30.0)
    kind, _, released_at = queue.get(timeout=TIMEOUT)
    assert kind == "releasing"
    kind, _, acquired_at = queue.get(timeout=TIMEOUT)
    assert kind == "acquired"
    assert acquired_at >= released_at
    _join(holder, waiter)


def test_never_two_processes_inside(migrated: str) -> None:
    inside, max_inside, entries = CTX.Value("i", 0), CTX.Value("i", 0), CTX.Value("i", 0)
    procs = [_start(_contend, migrated, inside, max_inside, entries, 3) for _ in range(3)]
    _join(*procs)
    assert entries.value == 9
    assert max_inside.value == 1


def test_dead_holder_does_not_block_forever(migrated: str, catalog: Catalog) -> None:
    queue = CTX.Queue()
    dead = _start(_hold_and_die, migrated, queue)
    kind, dead_pid, _ = queue.get(timeout=TIMEOUT)
    dead.join(TIMEOUT)
    assert kind == "acquired"
    # PostgreSQL frees the advisory lock when the server notices the closed connection.
    with promotion_lock(catalog, STACK, CLOUD, wait_s=10) as held:
        assert held.info.pid == os.getpid()
        if catalog.backend == "sqlite":
            assert held.broke_stale is not None and held.broke_stale.pid == dead_pid
    if catalog.backend == "sqlite":
        with catalog.transaction() as s:
            (ev,) = repo.events(s, kind="lock.broken")
            assert f"pid {dead_pid}" in ev.message and ev.details["stale_pid"] == dead_pid


def test_sqlite_lock_of_another_host_is_not_broken(tmp_path: Path) -> None:
    """SQLite only: PostgreSQL's locks belong to server sessions and cannot go stale."""
    catalog = open_catalog(f"sqlite:///{tmp_path / 'c.db'}")
    with catalog.transaction() as s:
        s.add(
            Lock(name=lock_name(STACK, CLOUD), token="t", owner="dave", pid=4_000_000,
                 host="builder-7", acquired_at=utcnow())
        )  # fmt: skip
    with (
        pytest.raises(PromotionLocked, match=r"\(pid 4000000 on host builder-7 since .*dave"),
        promotion_lock(catalog, STACK, CLOUD, wait_s=0.2),
    ):
        pass
    catalog.close()


def test_locks_are_per_stack_and_cloud(catalog: Catalog) -> None:
    with promotion_lock(catalog, STACK, CLOUD):
        with (
            promotion_lock(catalog.engine, STACK, "gcp"),
            promotion_lock(catalog.sessions, "local", CLOUD),
        ):
            pass
        with pytest.raises(PromotionLocked), promotion_lock(catalog, STACK, CLOUD):
            pass
    with promotion_lock(catalog, STACK, CLOUD):  # released on exit: free again
        pass
    with catalog.transaction() as s:
        assert s.query(Lock).count() == 0


def test_lock_is_released_when_the_body_raises(catalog: Catalog) -> None:
    with pytest.raises(RuntimeError), promotion_lock(catalog, STACK, CLOUD):
        raise RuntimeError("promotion failed")
    with promotion_lock(catalog, STACK, CLOUD):
        pass


def test_advisory_key_is_stable_and_distinct() -> None:
    a = advisory_key(lock_name("h100-training", "aws"))
    assert a == advisory_key("promotion:h100-training:aws")
    assert a != advisory_key(lock_name("h100-training", "gcp"))
    assert -(2**63) <= a < 2**63


def test_concurrent_first_open_migrates_once(catalog_url: str) -> None:
    """Three processes open a fresh catalog at the same moment: all succeed, one schema."""
    from imagectl.catalog.db import current_revision, head_revision, make_engine

    queue, start = CTX.Queue(), CTX.Event()
    procs = [_start(_open, catalog_url, queue, start) for _ in range(3)]
    start.set()
    opened = [queue.get(timeout=TIMEOUT) for _ in procs]
    _join(*procs)
    assert sorted(pid for _, pid in opened) == sorted(p.pid for p in procs)
    engine = make_engine(catalog_url)
    assert current_revision(engine) == head_revision()
    engine.dispose()
