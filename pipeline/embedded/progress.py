"""Live progress for long steps: what is happening now and for how long.

On a terminal each step shows a spinner line ``title — latest note (1m12s)`` updated
every second; in a log (CI) each note is printed with the step's elapsed time and a
heartbeat line every 30 s. Every step ends with a ✓/✗ line and its duration, and the
durations are kept for the summary and the benchmark.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import Console

HEARTBEAT_S = 30.0


def fmt_s(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(round(seconds), 60)
    return f"{minutes}m{sec:02d}s"


@dataclass
class StepRecord:
    key: str
    title: str
    seconds: float = 0.0
    outcome: str = "running"  # ok | failed | skipped | running
    detail: str = ""


@dataclass
class Step:
    record: StepRecord
    started: float
    progress: Progress
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        text = escape(text)  # notes quote tools' output: "[base : task]" is not markup
        self.notes.append(text)
        self.progress._note(self, text)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class Progress:
    def __init__(self, console: Console, *, live: bool | None = None):
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.steps: list[StepRecord] = []
        self._status: Any = None
        self._current: Step | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def timings(self) -> dict[str, float]:
        return {s.key: round(s.seconds, 1) for s in self.steps}

    def skip(self, key: str, title: str, why: str) -> None:
        self.steps.append(StepRecord(key, title, 0.0, "skipped", why))
        self.console.print(f"[dim]- {escape(title)}: skipped ({escape(why)})[/]")

    @contextlib.contextmanager
    def step(self, key: str, title: str) -> Iterator[Step]:
        record = StepRecord(key, title)
        self.steps.append(record)
        step = Step(record, time.monotonic(), self)
        self._current = step
        self._stop.clear()
        ticker = threading.Thread(target=self._tick, args=(step,), daemon=True)
        if self.live:
            self._status = self.console.status(self._line(step), spinner="dots")
            self._status.start()
        else:
            self.console.print(f"▶ {title}")
        ticker.start()
        try:
            yield step
        except BaseException as exc:
            record.outcome = "failed"
            record.detail = str(exc) or type(exc).__name__
            raise
        else:
            record.outcome = "ok"
        finally:
            self._stop.set()
            ticker.join(timeout=2)
            if self._status is not None:
                self._status.stop()
                self._status = None
            record.seconds = step.elapsed()
            self._current = None
            mark = "[green]✓[/]" if record.outcome == "ok" else "[red]✗[/]"
            last = f" — {step.notes[-1]}" if step.notes and record.outcome == "ok" else ""
            self.console.print(f"{mark} {title}{last} [dim]({fmt_s(record.seconds)})[/]")

    def _line(self, step: Step) -> str:
        note = f" — {step.notes[-1]}" if step.notes else ""
        return f"{step.record.title}{note} [dim]({fmt_s(step.elapsed())})[/]"

    def _note(self, step: Step, text: str) -> None:
        with self._lock:
            if self._status is not None:
                self._status.update(self._line(step))
            else:
                self.console.print(f"  [dim]{fmt_s(step.elapsed()):>7}[/] {text}")

    def _tick(self, step: Step) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(1.0):
            with self._lock:
                if self._status is not None:
                    self._status.update(self._line(step))
                elif time.monotonic() - last_beat >= HEARTBEAT_S:
                    last_beat = time.monotonic()
                    self.console.print(
                        f"  [dim]{fmt_s(step.elapsed()):>7} still {step.record.title.lower()}…[/]"
                    )
