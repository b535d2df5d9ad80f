"""One process by its pid and start time: a local VM's record names it so, and a recycled
pid (another process) is never taken for it."""

from __future__ import annotations

from pathlib import Path


def start_time(pid: int) -> str | None:
    """``pid``'s start time (``/proc/<pid>/stat`` field 22, clock ticks since boot); None
    when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: fields count from after its ')'
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


def alive(pid: int, started: str) -> bool:
    """Is the process ``pid`` that started at ``started`` still there?"""
    return bool(pid) and start_time(pid) == started
