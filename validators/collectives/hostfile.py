"""The multi-node hostfile of ``imagectl validate --nodes HOSTFILE``.

Format: one host per line, ``HOST [slots=N] [port=P]``; ``#`` starts a comment, blank
lines are ignored. The first host is the rendezvous endpoint (torchrun's c10d store runs
there, default port 29400); ``slots`` is the number of ranks (GPUs) on that host and must
be the same on every host (torchrun's ``--nproc-per-node``); without it, one rank per GPU.
``port`` is only read on the first line. Example::

    # 2 x p5.48xlarge
    10.0.0.11 slots=8 port=29400
    10.0.0.12 slots=8
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imagectl.core.errors import UserError

DEFAULT_PORT = 29400


@dataclass(frozen=True)
class Hostfile:
    path: str
    hosts: tuple[str, ...]
    slots: int | None
    port: int

    @property
    def endpoint(self) -> str:
        return f"{self.hosts[0]}:{self.port}"

    @property
    def nnodes(self) -> int:
        return len(self.hosts)


def parse_hostfile(path: str) -> Hostfile:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot read the hostfile: {exc.strerror or exc}",
            where=path,
            hint="Pass --nodes a file with one host per line (HOST [slots=N] [port=P])",
        ) from exc
    hosts: list[str] = []
    slots: set[int | None] = set()
    port = DEFAULT_PORT
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        host, *opts = line.split()
        host_slots: int | None = None
        for opt in opts:
            key, _, value = opt.partition("=")
            if key not in ("slots", "port") or not value.isdigit() or int(value) < 1:
                raise UserError(
                    f"unknown or malformed option {opt!r} for host {host!r}",
                    where=f"{path}:{lineno}",
                    hint="Options are slots=N and port=P with positive integers",
                )
            if key == "slots":
                host_slots = int(value)
            elif hosts:
                raise UserError(
                    "port= is only allowed on the first line (the rendezvous host)",
                    where=f"{path}:{lineno}",
                    hint="Move the port to the first host's line",
                )
            else:
                port = int(value)
        hosts.append(host)
        slots.add(host_slots)
    if not hosts:
        raise UserError(
            "the hostfile lists no host",
            where=path,
            hint="Add one host per line, first = rendezvous",
        )
    if len(slots) > 1:
        raise UserError(
            f"hosts have different slot counts ({sorted(str(s) for s in slots)})",
            where=path,
            hint="Give every host the same slots=N (torchrun runs the same ranks per node)",
        )
    return Hostfile(path=path, hosts=tuple(hosts), slots=slots.pop(), port=port)
