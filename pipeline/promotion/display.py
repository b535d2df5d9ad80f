"""Live progress per region for the promote command (rich), or one line per step."""

from __future__ import annotations

import threading
import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from imagectl.core.safetext import cell, cells


class RegionProgress:
    """A ``progress(region, step, detail)`` callback that renders what each region does.

    On a terminal: a live table, one row per region. Elsewhere (logs, CI, tests): one
    line per step change, so the output is a readable record.
    """

    def __init__(self, console: Console, regions: list[str]):
        self.console = console
        self.rows: dict[str, tuple[str, str, float]] = {
            r: ("queued", "", time.monotonic()) for r in regions
        }
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.live: Live | None = None

    def _table(self) -> Table:
        table = Table(title="promotion", title_justify="left")
        for col in ("region", "step", "detail", "elapsed"):
            table.add_column(col)
        now = time.monotonic()
        for region, (step, detail, _since) in self.rows.items():
            style = {"done": "green", "failed": "red"}.get(step, "")
            table.add_row(*cells(region, step, detail, f"{now - self.started:.1f} s"), style=style)
        return table

    def __enter__(self) -> RegionProgress:
        if self.console.is_terminal:
            self.live = Live(
                self._table(),
                console=self.console,
                refresh_per_second=8,
                get_renderable=self._table,
            )
            self.live.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.live is not None:
            self.live.__exit__(kind, value, tb)

    def __call__(self, region: str, step: str, detail: str = "") -> None:
        with self.lock:
            old = self.rows.get(region)
            self.rows[region] = (step, detail, time.monotonic())
            if self.live is None and (old is None or old[0] != step):
                t = time.monotonic() - self.started
                self.console.print(cell(f"[{t:6.1f} s] {region}: {step} {detail}".rstrip()))
