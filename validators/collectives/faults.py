"""The documented fault-injection hook of the collective worker (a protocol-level fault).

``IMAGECTL_FAULT_RANK`` holds comma-separated ``RANK:MODE[@OP]`` entries, read by the real
worker code path (tests use it to make a rank misbehave the way a broken host does):

- ``never_join``: the process starts but never enters the rendezvous;
- ``hang``: joins, then blocks forever before the collective (first one, or ``@OP``);
- ``raise``: raises an exception before the collective (its traceback is reported);
- ``crash``: dies by SIGKILL before the collective, without a word (like a segfault);
- ``corrupt``: contributes a wrong value to the collective (every rank must notice).

Unset in production. An entry naming another rank has no effect on this one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV = "IMAGECTL_FAULT_RANK"
MODES = ("never_join", "hang", "raise", "crash", "corrupt")


@dataclass(frozen=True)
class Fault:
    rank: int
    mode: str
    op: str | None = None

    def applies(self, op: str, first: bool) -> bool:
        """Whether this fault fires at ``op`` (``first``: the run's first collective)."""
        return op == self.op if self.op else first


def parse(text: str | None) -> list[Fault]:
    """Parse the hook's value; a malformed entry raises ValueError naming it."""
    faults = []
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        rank_text, _, rest = entry.partition(":")
        mode, _, op = rest.partition("@")
        if not rank_text.isdigit() or mode not in MODES:
            raise ValueError(
                f"{ENV} entry {entry!r} is malformed: expected RANK:MODE[@OP] with MODE one "
                f"of {', '.join(MODES)}"
            )
        faults.append(Fault(int(rank_text), mode, op or None))
    return faults


def for_rank(rank: int, environ: dict[str, str] | None = None) -> list[Fault]:
    env = os.environ if environ is None else environ
    return [f for f in parse(env.get(ENV)) if f.rank == rank]
