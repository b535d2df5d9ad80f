"""Whole-command deadlines: ``reap``, ``drift``, ``doctor``, ``promote``, ``rollout`` and
``validate-image`` each end by a deadline (a default, and ``--deadline SECONDS``).

Per-call timeouts do not bound a command: an endpoint that accepts a connection and never
answers, retried, holds it for as long as the retries last. At the deadline the command
is interrupted where it waits (``SIGALRM`` in the main thread: a blocking socket read or
a wait on worker threads raises ``DeadlineExceeded``, ``finally`` blocks run) and exits 1
with one paragraph naming the call it was waiting on: the HTTP request in flight (every
cloud SDK here sends through urllib3: its method, host, path and, for AWS's query
protocol, the action), else the imagectl function it was in. Should the command not
unwind within a grace period (a worker thread that cannot be interrupted), the process
prints the same paragraph and ends (``os._exit(1)``): a deadline is a deadline.

``IMAGECTL_DEADLINE_S`` overrides every default (CI jobs with their own bound).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from imagectl.core.errors import EXIT_FAILED, UserError
from imagectl.core.numbers import WEEK_S, Bounded, checked

if TYPE_CHECKING:
    from urllib3.connectionpool import HTTPConnectionPool

    from imagectl.core.signals import SignalHandler

ENV = "IMAGECTL_DEADLINE_S"
DEFAULTS: dict[str, float] = {  # seconds
    "reap": 15 * 60,
    "doctor": 10 * 60,
    "drift": 30 * 60,
    "promote": 12 * 3600,  # a large AMI's copy to a far region takes hours
    "validate-image": 6 * 3600,  # boots, a loaded profile, several hosts
    "rollout": 12 * 3600,  # an advance promotes (copies); its Prometheus reads: 5 min
}
GRACE_S = 15.0  # after the deadline: time to unwind before the process is ended
ENV_GRACE = "IMAGECTL_DEADLINE_GRACE_S"  # tests shorten it
NO_DEADLINE = "0: no deadline; at most a week"


class DeadlineExceeded(BaseException):
    """Raised in the main thread at the deadline. A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` on the way (an SDK's retry loop,
    a best-effort check) mistakes it for a failed call and carries on."""


class CommandDeadline(UserError):
    """The command ran past its deadline (exit 1, one paragraph naming the call)."""

    exit_code = EXIT_FAILED


# -- what the command waits on -----------------------------------------------------------
_in_flight: dict[int, str] = {}  # thread id -> the HTTP request it waits on
_lock = threading.Lock()
_patched = False


def _describe(method: str, url: str, pool: HTTPConnectionPool, body: object) -> str:
    host = f"{getattr(pool, 'scheme', 'http')}://{getattr(pool, 'host', '?')}"
    if getattr(pool, "port", None):
        host += f":{pool.port}"
    what = f"{method} {host}{url.split('?', 1)[0]}"
    if isinstance(body, (bytes, str)):
        text = body.decode("latin-1") if isinstance(body, bytes) else body
        for part in text[:2000].split("&"):
            if part.startswith("Action="):  # the AWS query protocol names its operation here
                what += f" ({part.removeprefix('Action=')})"
                break
    return what


def _track_http() -> None:
    """Record the urllib3 request each thread waits on (botocore, google-auth's requests
    transport and azure-core's all send through ``HTTPConnectionPool.urlopen``)."""
    global _patched
    if _patched:
        return
    try:
        from urllib3.connectionpool import HTTPConnectionPool
    except ImportError:  # pragma: no cover - every cloud SDK here depends on it
        return
    original = HTTPConnectionPool.urlopen

    @functools.wraps(original)
    def urlopen(self: Any, method: str, url: str, body: Any = None, *a: Any, **kw: Any) -> Any:
        me = threading.get_ident()
        with _lock:
            _in_flight[me] = _describe(method, url, self, body)
        try:
            return original(self, method, url, body, *a, **kw)
        finally:
            with _lock:
                _in_flight.pop(me, None)

    HTTPConnectionPool.urlopen = urlopen  # type: ignore[method-assign]
    _patched = True


def _where() -> str:
    """The call in flight (main thread first), else the innermost imagectl frame."""
    main = threading.main_thread().ident or 0
    with _lock:
        calls = dict(_in_flight)
    if calls:
        call = calls.get(main) or next(iter(calls.values()))
        return f"waiting on {call}"
    frame = sys._current_frames().get(main)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("imagectl") and module != __name__:
            return f"in {module}.{frame.f_code.co_name} (line {frame.f_lineno})"
        frame = frame.f_back
    return "in the command"


def _message(command: str, seconds: float, where: str) -> str:
    return (
        f"imagectl {command} ran past its deadline of {seconds:g} s, {where}; it was "
        "stopped. The endpoint accepted the request and never answered, or the work takes "
        "longer than the deadline allows"
    )


@contextmanager
def deadline(command: str, seconds: float | None) -> Iterator[None]:
    """Run the block within ``seconds`` (None or 0: no deadline)."""
    if not seconds or seconds <= 0:
        yield
        return
    _track_http()
    started = time.monotonic()
    in_main = threading.current_thread() is threading.main_thread()
    done = threading.Event()

    try:
        grace = float(os.environ.get(ENV_GRACE, "") or GRACE_S)
    except ValueError:
        grace = GRACE_S
    if not 0 <= grace <= GRACE_S:  # tests shorten it; inf or nan would never stop
        grace = GRACE_S

    def hard_stop() -> None:
        if done.wait(seconds + grace):
            return
        text = _message(command, seconds, _where())
        sys.stderr.write(f"error: {text}. Nothing after this point ran.\n")
        sys.stderr.flush()
        os._exit(EXIT_FAILED)

    watchdog = threading.Thread(target=hard_stop, name="imagectl-deadline", daemon=True)
    watchdog.start()
    previous: SignalHandler = None
    earlier = 0.0
    if in_main:

        def on_alarm(_sig: int, _frame: FrameType | None) -> None:
            raise DeadlineExceeded(_message(command, seconds, _where()))

        previous = signal.signal(signal.SIGALRM, on_alarm)
        earlier = signal.setitimer(signal.ITIMER_REAL, seconds)[0]  # someone else's alarm
    try:
        yield
    except DeadlineExceeded as exc:
        raise CommandDeadline(
            str(exc),
            hint=f"Check that the endpoint answers, or give more time with --deadline "
            f"(or ${ENV}); it ran {time.monotonic() - started:.1f} s",
        ) from None
    finally:
        done.set()
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if earlier:  # give back what is left of an alarm set before this command
                left = earlier - (time.monotonic() - started)
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))


def with_deadline(name: str, cmd: click.Command) -> click.Command:
    """``cmd`` with a ``--deadline SECONDS`` option (default ``DEFAULTS[name]``, or
    ``$IMAGECTL_DEADLINE_S``) that bounds its whole run. Idempotent; other commands are
    returned as they are."""
    if name not in DEFAULTS or getattr(cmd, "_imagectl_deadline", False):
        return cmd
    default = DEFAULTS[name]
    cmd.params.append(
        click.Option(
            ["--deadline"],
            type=Bounded(0, WEEK_S, unit="seconds", note=NO_DEADLINE),
            default=None,
            help=f"Seconds the whole command may take (default {default:g}, or "
            f"${ENV}; 0: none). Past it the command stops, naming the call it waited on.",
        )
    )
    callback: Callable[..., object] | None = cmd.callback
    assert callback is not None

    @functools.wraps(callback)
    def bounded(*args: object, deadline: float | None = None, **kwargs: object) -> object:
        if deadline is None:
            raw = os.environ.get(ENV, "").strip()
            deadline = (
                checked(raw, what=f"${ENV}", low=0, high=WEEK_S, unit="seconds", note=NO_DEADLINE)
                if raw
                else default
            )
        with _deadline_scope(name, deadline):
            return callback(*args, **kwargs)

    cmd.callback = bounded
    cmd._imagectl_deadline = True  # type: ignore[attr-defined]
    return cmd


_deadline_scope = deadline
