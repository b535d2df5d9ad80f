"""The test hook for kill points: ``IMAGECTL_TEST_CRASH_AT=<point>[:<n>]``.

The real promotion code calls ``crash_point(name)`` right after each recorded side
effect. When the variable names that point, the process kills itself with SIGKILL (no
clean-up, no ``finally``: what a power cut or ``kill -9`` does) the ``n``-th time the
point is reached (default 1). Unset, ``crash_point`` costs one dictionary look-up.

Points, in the order a promotion reaches them:

=======================  ===========================================================
``after_copy_requested``  the copy's token is recorded; the cloud call is not made yet
``after_copy_call``       the cloud accepted the copy; the catalog does not know its id
``after_copy_started``    the copy's id is recorded; the copy is still running
``after_region_done``     a region finished (available, tagged, shared, recorded)
``before_pointer_flip``   every region is done; no pointer has moved
``inside_family_member``  Google Cloud: the promoted image's ``images.patch`` into the
                          family was sent, its operation not waited on
``after_pointer_set``     a region's cloud pointer moved; the catalog does not know yet
``before_finish``         every pointer moved; the promotion is not closed yet
=======================  ===========================================================
"""

from __future__ import annotations

import os
import signal
import threading

ENV_CRASH = "IMAGECTL_TEST_CRASH_AT"
POINTS = (
    "after_copy_requested",
    "after_copy_call",
    "after_copy_started",
    "after_region_done",
    "before_pointer_flip",
    "inside_family_member",
    "after_pointer_set",
    "before_finish",
)

_lock = threading.Lock()
_counts: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process if ``$IMAGECTL_TEST_CRASH_AT`` names ``name`` (n-th time)."""
    raw = os.environ.get(ENV_CRASH)
    if not raw:
        return
    point, _, nth = raw.partition(":")
    if point != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        if _counts[name] < int(nth or 1):
            return
        os.kill(os.getpid(), signal.SIGKILL)
