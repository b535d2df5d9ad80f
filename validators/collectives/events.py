"""Reading the workers' event files into per-rank state (see worker.py for the events)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RankState:
    rank: int
    pid: int | None = None
    host: str | None = None
    started_t: float | None = None
    rendezvous_t: float | None = None
    joined_t: float | None = None
    first_collective_t: float | None = None
    done_t: float | None = None
    current: tuple[str, int] | None = None  # (op, requested bytes) entered, not yet exited
    last_event: str | None = None
    last_t: float | None = None
    error: str | None = None
    traceback: str | None = None
    nccl_version: str | None = None
    backend: str | None = None
    exits: list[dict[str, Any]] = field(default_factory=list)
    entered: set[tuple[str, int]] = field(default_factory=set)

    def apply(self, ev: dict[str, Any]) -> None:
        kind, t = ev.get("ev"), ev.get("t")
        self.last_event, self.last_t = kind, t
        if kind == "started":
            self.started_t, self.pid, self.host = t, ev.get("pid"), ev.get("host")
        elif kind == "rendezvous":
            self.rendezvous_t, self.backend = t, ev.get("backend")
        elif kind == "joined":
            self.joined_t, self.nccl_version = t, ev.get("nccl_version")
        elif kind == "enter":
            self.current = (ev["op"], int(ev["bytes"]))
            self.entered.add(self.current)
        elif kind == "exit":
            self.current = None
            self.exits.append(ev)
        elif kind == "first_collective":
            self.first_collective_t = t
        elif kind == "error":
            self.error, self.traceback = ev.get("error"), ev.get("traceback")
        elif kind == "done":
            self.done_t = t


class EventReader:
    """Tails ``rank-*.jsonl`` in a folder, keeping offsets; partial lines wait for the next poll."""

    def __init__(self, events_dir: str):
        self.events_dir = events_dir
        self.ranks: dict[int, RankState] = {}
        self._offsets: dict[str, int] = {}
        self.last_progress_t: float | None = None

    def poll(self) -> int:
        """Read new events; returns how many arrived."""
        count = 0
        for name in sorted(os.listdir(self.events_dir)):
            if not (name.startswith("rank-") and name.endswith(".jsonl")):
                continue
            rank = int(name[5:-6])
            path = os.path.join(self.events_dir, name)
            with open(path, "rb") as fh:
                fh.seek(self._offsets.get(name, 0))
                data = fh.read()
            end = data.rfind(b"\n") + 1
            if end == 0:
                continue
            self._offsets[name] = self._offsets.get(name, 0) + end
            state = self.ranks.setdefault(rank, RankState(rank))
            for line in data[:end].splitlines():
                if line.strip():
                    ev = json.loads(line)
                    state.apply(ev)
                    self.last_progress_t = max(self.last_progress_t or 0.0, ev.get("t", 0.0))
                    count += 1
        return count
