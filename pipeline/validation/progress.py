"""Live progress of a validation run (rich): steps, instance states, validator checks.

``Reporter`` is the interface the orchestration calls; ``RichReporter`` draws a live
table (instances and their states, checks per host as receipts arrive) under a log of
steps; ``QuietReporter`` records events only (``--json`` runs and tests).
"""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from imagectl.core.safetext import cells, markup
from imagectl.validators.results import CheckResult


class Reporter:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []
        self._lock = threading.Lock()

    def step(self, message: str) -> None:
        with self._lock:
            self.events.append(("step", message))

    def instance(self, slot: int, instance_id: str, location: str, state: str) -> None:
        with self._lock:
            self.events.append(("instance", (slot, instance_id, location, state)))

    def task(self, host: str, task: str, status: str) -> None:
        with self._lock:
            self.events.append(("task", (host, task, status)))

    def checks(self, host: str, checks: list[CheckResult]) -> None:
        with self._lock:
            self.events.append(("checks", (host, len(checks))))

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


QuietReporter = Reporter


class RichReporter(Reporter):
    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console
        self.rows: dict[int, dict[str, str]] = {}
        self.started = time.monotonic()
        self._live: Live | None = None

    def _render(self) -> Table:
        table = Table(title="validation hosts", expand=False)
        for col in ("slot", "instance", "location", "state", "task", "checks"):
            table.add_column(col)
        for slot in sorted(self.rows):
            r = self.rows[slot]
            table.add_row(  # cloud and host words, printed literally
                *cells(
                    str(slot),
                    r.get("id", ""),
                    r.get("location", ""),
                    r.get("state", ""),
                    r.get("task", ""),
                    r.get("checks", ""),
                )
            )
        return table

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def __enter__(self) -> RichReporter:
        self._live = Live(
            self._render(), console=self.console, refresh_per_second=4, transient=False
        )
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)
            self._live = None

    def step(self, message: str) -> None:
        super().step(message)
        elapsed = time.monotonic() - self.started
        self.console.print(f"[dim]{elapsed:6.1f}s[/] {markup(message)}")

    def instance(self, slot: int, instance_id: str, location: str, state: str) -> None:
        super().instance(slot, instance_id, location, state)
        self.rows.setdefault(slot, {}).update(id=instance_id, location=location, state=state)
        self._refresh()

    def _slot_of(self, host: str) -> int | None:
        return next((s for s, r in self.rows.items() if r.get("id") == host), None)

    def task(self, host: str, task: str, status: str) -> None:
        super().task(host, task, status)
        slot = self._slot_of(host)
        if slot is not None:
            self.rows[slot]["task"] = f"{task} ({status})"
            self._refresh()

    def checks(self, host: str, checks: list[CheckResult]) -> None:
        super().checks(host, checks)
        counts: dict[str, int] = {}
        for c in checks:
            counts[c.outcome.value] = counts.get(c.outcome.value, 0) + 1
        failed = sorted({c.id for c in checks if c.failed})
        text = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
        slot = self._slot_of(host)
        if slot is not None:
            self.rows[slot]["checks"] = text
            self._refresh()
        for check_id in failed:
            self.console.print(f"       [red]✗[/] {markup(host)}: {markup(check_id)}")
