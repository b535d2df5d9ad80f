"""Promotion locks: at most one promotion of a stack on a cloud at a time, across processes
and hosts.

Usage::

    with promotion_lock(catalog, "h100-training", "aws", wait_s=30) as held:
        ...  # promote; held.info says who we are

``promotion_lock`` either acquires within ``wait_s`` seconds or raises ``PromotionLocked``:
"promotion of stack X on cloud Y is already running (pid N on host H since T)". That error
exits with code 1, not 2: the request itself is valid, but another run is doing the same
work; trying again later can succeed.

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``, or
  ``pg_advisory_lock`` under ``SET LOCAL lock_timeout`` when waiting) on a dedicated
  connection, keyed by a 64-bit hash of "promotion:<stack>:<cloud>". The server frees it
  when the holder's connection dies. A row in ``locks`` records the holder for messages.
- SQLite: a row in ``locks`` inserted inside ``BEGIN IMMEDIATE`` (the database write lock
  makes check-and-insert atomic). A row left by a dead process on this host (its pid no
  longer exists) is broken, with a warning and a ``lock.broken`` event. A row from another
  host is never broken automatically, nor one whose pid now belongs to another process
  (pid reuse): delete the row by hand (``DELETE FROM locks WHERE name = ...``) once sure.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, delete, exc, insert, text
from sqlalchemy.orm import Session, sessionmaker

from imagectl.actor import current_actor
from imagectl.catalog.models import Event, Lock, utcnow
from imagectl.core.errors import EXIT_FAILED, UserError

if TYPE_CHECKING:
    from imagectl.catalog.db import Catalog

log = logging.getLogger("imagectl.catalog.locks")

POLL_S = 0.1


@dataclass(frozen=True)
class LockInfo:
    name: str
    owner: str
    pid: int
    host: str
    acquired_at: datetime | None

    def describe(self) -> str:
        since = self.acquired_at.strftime("%Y-%m-%d %H:%M:%S UTC") if self.acquired_at else "?"
        return f"pid {self.pid} on host {self.host} since {since}, by {self.owner}"


class PromotionLocked(UserError):
    """Another process holds the promotion lock of this stack and cloud (exit 1)."""

    exit_code = EXIT_FAILED

    def __init__(self, stack: str, cloud: str, holder: LockInfo | None, waited_s: float):
        self.stack = stack
        self.cloud = cloud
        self.holder = holder
        who = holder.describe() if holder else "holder unknown"
        super().__init__(
            f"promotion of stack {stack} on cloud {cloud} is already running ({who}); "
            f"waited {waited_s:.1f} s",
            hint="Wait for it to finish, or pass a longer wait",
        )


def lock_name(stack: str, cloud: str) -> str:
    return f"promotion:{stack}:{cloud}"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_lock`` derived from the lock name."""
    return int.from_bytes(
        hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True
    )


def _engine_of(target: object) -> Engine:
    if isinstance(target, Engine):
        return target
    engine = getattr(target, "engine", None)  # a Catalog
    if isinstance(engine, Engine):
        return engine
    if isinstance(target, sessionmaker):
        bind = target.kw.get("bind")
        if isinstance(bind, Engine):
            return bind
    raise TypeError(f"promotion_lock needs an Engine, sessionmaker or Catalog, got {target!r}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _row_info(row: Lock | None) -> LockInfo | None:
    if row is None:
        return None
    return LockInfo(row.name, row.owner, row.pid, row.host, row.acquired_at)


@dataclass
class HeldLock:
    """What ``promotion_lock`` yields: the lock's name and our holder record."""

    name: str
    info: LockInfo
    broke_stale: LockInfo | None = None


def _me(name: str) -> LockInfo:
    return LockInfo(name, current_actor(), os.getpid(), socket.gethostname(), utcnow())


def _write_row(session: Session, me: LockInfo, token: str) -> None:
    session.execute(delete(Lock).where(Lock.name == me.name))
    session.execute(
        insert(Lock).values(
            name=me.name, token=token, owner=me.owner, pid=me.pid, host=me.host,
            acquired_at=me.acquired_at,
        )
    )  # fmt: skip


@contextlib.contextmanager
def _sqlite_lock(
    engine: Engine, stack: str, cloud: str, wait_s: float, poll_s: float
) -> Iterator[HeldLock]:
    name = lock_name(stack, cloud)
    token = uuid.uuid4().hex
    me = _me(name)
    deadline = time.monotonic() + wait_s
    started = time.monotonic()
    holder: LockInfo | None = None
    broke: LockInfo | None = None
    while True:
        with Session(engine) as session, session.begin():  # BEGIN IMMEDIATE (see db.py)
            row = session.get(Lock, name)
            holder = _row_info(row)
            if row is not None and row.host == me.host and not _pid_alive(row.pid):
                broke = holder
                log.warning("breaking stale promotion lock %s: holder %s is gone", name, holder)
                session.add(
                    Event(
                        actor=me.owner, stack=stack, cloud=cloud, kind="lock.broken",
                        message=f"broke stale promotion lock held by dead {broke.describe()}"
                        if broke else "broke stale promotion lock",
                        details={"lock": name, "stale_pid": row.pid, "stale_host": row.host},
                    )
                )  # fmt: skip
                row = None
            if row is None:
                _write_row(session, me, token)
                break
        if time.monotonic() >= deadline:
            raise PromotionLocked(stack, cloud, holder, time.monotonic() - started)
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
    try:
        yield HeldLock(name, me, broke)
    finally:
        with Session(engine) as session, session.begin():
            session.execute(delete(Lock).where(Lock.name == name, Lock.token == token))


def _pg_holder(conn: Connection, name: str) -> LockInfo | None:
    with Session(conn) as session:
        return _row_info(session.get(Lock, name))


@contextlib.contextmanager
def _postgres_lock(
    engine: Engine, stack: str, cloud: str, wait_s: float, poll_s: float
) -> Iterator[HeldLock]:
    name = lock_name(stack, cloud)
    key = advisory_key(name)
    token = uuid.uuid4().hex
    me = _me(name)
    started = time.monotonic()
    with engine.connect() as conn:
        got = False
        if wait_s <= 0:
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
            conn.commit()
        else:
            try:
                with conn.begin():
                    ms = max(1, int(wait_s * 1000))
                    conn.execute(text(f"SET LOCAL lock_timeout = {ms}"))
                    conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
                got = True
            except exc.OperationalError as error:
                if getattr(error.orig, "sqlstate", None) != "55P03":  # lock_not_available
                    raise
        if not got:
            holder = _pg_holder(conn, name)
            conn.rollback()
            raise PromotionLocked(stack, cloud, holder, time.monotonic() - started)
        try:
            with Session(conn) as session:
                _write_row(session, me, token)
                session.commit()
            yield HeldLock(name, me)
        finally:
            conn.rollback()  # a failed statement in the body must not block the clean-up
            with Session(conn) as session:
                session.execute(delete(Lock).where(Lock.name == name, Lock.token == token))
                session.commit()
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()


@contextlib.contextmanager
def promotion_lock(
    target: Engine | sessionmaker[Session] | Catalog,
    stack: str,
    cloud: str,
    *,
    wait_s: float = 0.0,
    poll_s: float = POLL_S,
) -> Iterator[HeldLock]:
    """Hold the promotion lock of ``stack`` on ``cloud`` for the ``with`` block.

    ``target`` is an Engine, a sessionmaker bound to one, or a ``Catalog``. Waits up to
    ``wait_s`` seconds (0: try once), then raises ``PromotionLocked``.
    """
    engine = _engine_of(target)
    if engine.url.get_backend_name() == "postgresql":
        with _postgres_lock(engine, stack, cloud, wait_s, poll_s) as held:
            yield held
    else:
        with _sqlite_lock(engine, stack, cloud, wait_s, poll_s) as held:
            yield held
