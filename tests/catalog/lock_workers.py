"""Code run in the child processes of test_locks.py.

A plain module (no pytest import) so the forkserver can preload it: each child then starts
in milliseconds instead of importing SQLAlchemy again.
"""

from __future__ import annotations

import os
import time
from typing import Any

from imagectl.catalog.db import open_catalog
from imagectl.catalog.locks import PromotionLocked, promotion_lock

STACK, CLOUD = "h100-training", "aws"
TIMEOUT = 60


def _hold(url: str, queue: Any, release: Any, hold_s: float | None) -> None:
    catalog = open_catalog(url)
    with promotion_lock(catalog, STACK, CLOUD):
        queue.put(("acquired", os.getpid(), time.time()))
        if hold_s is None:
            release.wait(TIMEOUT)
        else:
            time.sleep(hold_s)
        queue.put(("releasing", os.getpid(), time.time()))
    catalog.close()


def _hold_and_die(url: str, queue: Any) -> None:
    catalog = open_catalog(url)
    lock = promotion_lock(catalog, STACK, CLOUD)
    lock.__enter__()
    queue.put(("acquired", os.getpid(), time.time()))
    queue.close()
    queue.join_thread()  # the message must leave before the abrupt exit
    os._exit(0)  # no clean-up: the lock row (SQLite) / connection (PostgreSQL) is left behind


def _try(url: str, queue: Any, wait_s: float) -> None:
    catalog = open_catalog(url)
    started = time.monotonic()
    try:
        with promotion_lock(catalog, STACK, CLOUD, wait_s=wait_s):
            queue.put(("acquired", os.getpid(), time.time()))
    except PromotionLocked as error:
        queue.put(("locked", str(error), time.monotonic() - started, error.exit_code))
    finally:
        catalog.close()


def _contend(url: str, inside: Any, max_inside: Any, entries: Any, rounds: int) -> None:
    catalog = open_catalog(url)
    for _ in range(rounds):
        with promotion_lock(catalog, STACK, CLOUD, wait_s=TIMEOUT, poll_s=0.02):
            with inside.get_lock():
                inside.value += 1
                max_inside.value = max(max_inside.value, inside.value)
            time.sleep(0.05)
            with inside.get_lock():
                inside.value -= 1
                entries.value += 1
    catalog.close()


def _open(url: str, queue: Any, start: Any) -> None:
    start.wait(TIMEOUT)
    catalog = open_catalog(url)
    queue.put(("opened", os.getpid()))
    catalog.close()
