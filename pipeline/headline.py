"""The first line of a command whose checks did not all run.

A nightly log is read from the top: a command that could not run some of its checks says
so first, before any all-clear ("no drift", "no expired instances", "ok"), in one wording
everywhere: ``2 of 5 checks could not run: <what>; <what>``. ``drift``, ``reap``,
``doctor``, ``status`` and ``verify`` print it (``tests/cli/test_headlines.py``).
"""

from __future__ import annotations

from collections.abc import Sequence


def could_not_run(total: int, failed: Sequence[str], what: str = "checks") -> str | None:
    """``"2 of 5 checks could not run: a; b"``, or None when every one ran."""
    if not failed:
        return None
    total = max(total, len(failed))
    return f"{len(failed)} of {total} {what} could not run: " + "; ".join(failed)


def all_clear(text: str, failed: Sequence[str]) -> str:
    """An all-clear limited to what ran, when something did not."""
    return text if not failed else f"{text} by the checks that ran"
