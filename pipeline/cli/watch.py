"""``imagectl watch``: the passive watcher on a fleet node (``imagectl.validators.watch``).

Reads this boot's kernel log and NVML (no GPU work) every ``--interval`` seconds and
writes ``imagectl-watch.prom`` for the node exporter's textfile collector. ``--once``
looks once and exits (0 read, 1 the log or NVML could not be read); ``--replay`` reads a
snapshot instead of this host (the tests' emulated fleet).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from imagectl.cli.common import crash_traces
from imagectl.core.numbers import Bounded

# as imagectl.validators.watch has them (its import loads NVML: not for --help); a test
# keeps them equal
DEFAULT_FILE = "/var/lib/node_exporter/textfile_collector/imagectl-watch.prom"
DEFAULT_INTERVAL_S = 60.0


@click.command("watch")
@click.option(
    "--prometheus",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_FILE,
    show_default=True,
    help="The textfile collector file to write (atomically).",
)
@click.option(
    "--interval",
    "interval_s",
    type=Bounded(1, 86400, unit="seconds"),
    default=DEFAULT_INTERVAL_S,
    show_default=True,
    help="Seconds between looks.",
)
@click.option("--once", is_flag=True, help="Look once, write the file and exit.")
@click.option(
    "--replay",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read a snapshot (imagectl snapshot) instead of this host.",
)
@click.option(
    "--kernel-log",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the kernel log from this file instead of the journal.",
)
def command(
    prometheus: Path, interval_s: float, once: bool, replay: Path | None, kernel_log: Path | None
) -> int:
    """Watch this node passively (journal Xid/SXid, NVML clock events, row remaps, ECC)."""
    crash_traces()
    from imagectl.validators.session import Options, build_context
    from imagectl.validators.snapshot import load_snapshot
    from imagectl.validators.watch import watch_once

    snapshot = load_snapshot(replay) if replay is not None else None

    def look() -> bool:
        opts = Options(snapshot=snapshot, kernel_log_file=kernel_log, hygiene=False)
        return watch_once(build_context(opts), prometheus).read_ok

    if once:
        return 0 if look() else 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        look()
        stop.wait(interval_s)
    return 0
