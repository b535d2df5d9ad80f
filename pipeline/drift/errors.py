"""A drift check that could not run is an error of that stack and source, reported beside
the results the other checks computed (``StackDrift.errors``), never an exit that drops
them. ``recorded(report, source, stacks, cloud)`` catches the one-paragraph ``UserError``
a source raises (``inventory.guarded`` turns SDK failures into one; an index that cannot
be fetched is one) and records it for every stack it concerns, with its kind:

- ``credentials``: the cloud SDK found no usable credentials
- ``unreachable``: an endpoint or index that did not answer (network, DNS, a deadline)
- ``refused``: the API answered with a refusal (permissions, a missing resource)
- ``error``: anything else the source reported (a corrupt index, an unreadable receipt)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from imagectl.clouds.sdk_errors import CREDENTIALS, REFUSED, UNREACHABLE
from imagectl.core.errors import UserError
from imagectl.drift.findings import CheckError, DriftReport

_UNREACHABLE = {
    *UNREACHABLE,
    "imagectl.drift.http_cache.FetchFailed",
    "imagectl.clouds.deadlines.CloudDeadline",
    "urllib.error.URLError",
    "builtins.ConnectionError",
    "builtins.TimeoutError",
    "socket.timeout",
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def kind_of(exc: BaseException) -> str:
    """``credentials``, ``unreachable``, ``refused`` or ``error``: what the cause chain
    holds (SDK exceptions recognised by class name, as ``imagectl.clouds.sdk_errors``)."""
    names: set[str] = set()
    for link in _chain(exc):
        names |= {f"{k.__module__}.{k.__qualname__}" for k in type(link).__mro__}
    if names.intersection(CREDENTIALS):
        return "credentials"
    if names.intersection(_UNREACHABLE):
        return "unreachable"
    if names.intersection(REFUSED):
        return "refused"
    return "error"


def _paragraph(exc: UserError) -> str:
    """The error as one paragraph: an SDK's multi-line message keeps its first line (Azure's
    DefaultAzureCredential lists every credential it tried)."""
    lines = [ln.strip() for ln in exc.message.strip().splitlines() if ln.strip()]
    first = (lines[0] if lines else type(exc).__name__).rstrip(".")
    if len(lines) > 1:
        first += " (...)"
    return UserError(first, where=exc.where, hint=exc.hint).render()


@contextlib.contextmanager
def recorded(
    report: DriftReport, source: str, stacks: Iterable[str], cloud: str | None = None
) -> Iterator[None]:
    """Run a source's check; a ``UserError`` becomes an error of each of ``stacks``."""
    names = list(stacks)
    try:
        yield
    except UserError as exc:
        kind, message = kind_of(exc), _paragraph(exc)
        for name in names:
            report.stack(name).errors.append(CheckError(source, name, kind, message, cloud))
