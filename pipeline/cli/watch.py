"""``imagectl watch``: the passive watcher on a fleet node (``imagectl.validators.watch``).

Reads this boot's kernel log and NVML (no GPU work) every ``--interval`` seconds and
writes ``imagectl-watch.prom`` for the node exporter's textfile collector. ``--once``
looks once and exits (0 read, 1 the log or NVML could not be read: said on stderr, and
the file says ``imagectl_watch_read_ok 0``); ``--replay`` reads a snapshot instead of this
host (the tests' emulated fleet); ``--json`` prints each look (one JSON document a line).
The default file's folder is the node exporter's: where it does not exist (no
node_exporter here) nothing is created and the command says so (exit 2); a ``--prometheus``
given is written where it names, its folder made.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from imagectl.cli.common import console, crash_traces
from imagectl.core.commandtext import say
from imagectl.core.errors import UserError
from imagectl.core.numbers import Bounded
from imagectl.core.output import json_flag

if TYPE_CHECKING:
    from imagectl.validators.watch import Observation

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
    help="Seconds between looks (not with --once, which looks once).",
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
@json_flag("Print each look as JSON (one document a line) besides writing the file.")
@click.pass_context
def command(
    ctx: click.Context,
    prometheus: Path,
    interval_s: float,
    once: bool,
    replay: Path | None,
    kernel_log: Path | None,
    as_json: bool,
) -> int:
    """Watch this node passively (journal Xid/SXid, NVML clock events, row remaps, ECC).

    With --once, a log or NVML that cannot be read is said on stderr and the file says
    imagectl_watch_read_ok 0. The default file's folder missing (no node_exporter here)
    is bad input: nothing is created.
    """
    crash_traces()
    spaced = ctx.get_parameter_source("interval_s")
    if once and spaced is not None and spaced.name != "DEFAULT":
        raise UserError(
            "--interval is not read by --once: --once looks once and exits, so there is no "
            "time between looks to set",
            hint="Drop --interval to look once, or drop --once to look every --interval seconds",
        )
    source = ctx.get_parameter_source("prometheus")
    if source is not None and source.name == "DEFAULT" and not prometheus.parent.is_dir():
        raise UserError(
            f"the node exporter's textfile collector folder {prometheus.parent} does not "
            "exist (no node_exporter here?): nothing was written or created",
            hint="Pass --prometheus FILE where the file should go (its folder is made), or "
            "install node_exporter with --collector.textfile.directory there",
        )
    from imagectl.validators.session import Options, build_context
    from imagectl.validators.snapshot import load_snapshot
    from imagectl.validators.watch import watch_once

    snapshot = load_snapshot(replay) if replay is not None else None
    said: list[str] = []

    def look() -> bool:
        opts = Options(snapshot=snapshot, kernel_log_file=kernel_log, hygiene=False)
        obs = watch_once(build_context(opts), prometheus)
        if as_json:
            sys.stdout.write(json.dumps(_payload(obs, prometheus)) + "\n")
            sys.stdout.flush()
        if obs.errors != said:  # said once, not at every look
            said[:] = obs.errors
            if obs.errors:
                say(
                    console(stderr=True),
                    f"watch: could not read {'; '.join(obs.errors)}. {prometheus} says "
                    "imagectl_watch_read_ok 0: this node's health is unknown, never healthy",
                )
        return obs.read_ok

    if once:
        return 0 if look() else 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        look()
        stop.wait(interval_s)
    return 0


def _payload(obs: Observation, path: Path) -> dict[str, object]:
    """One look as JSON: what the file holds, and where it went."""
    return {
        "at": obs.at,
        "read_ok": obs.read_ok,
        "errors": list(obs.errors),
        "gpus": obs.gpus,
        "xid_events": sum(obs.xids.values()),
        "xid_codes": {str(code): n for code, n in sorted(obs.xids.items())},
        "sxid_events": obs.sxids,
        "problems": [{"gpu": g, "reason": r} for g, r in sorted(obs.problems)],
        "prometheus": str(path),
    }
