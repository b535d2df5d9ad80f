"""What every command prints through, on both sides (the controller's commands and the
validator's host-side ones): ``--json``, JSON on stdout, a rich console, and the Python
stack on a crash inside a C library."""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # rich loads when a console is made, not at import (--help stays light)
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


def json_flag(help: str = "Print JSON instead of a table.") -> Callable[[F], F]:
    """``--json`` (``as_json``) with a command's own help, where it says more."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def json_option(func: F) -> F:
    """``--json``: machine-readable output on stdout instead of the rich view."""
    return json_flag()(func)


def console(stderr: bool = False) -> Console:
    """A rich console; when output is not a terminal, wide enough for tables in logs."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def crash_traces() -> None:
    """A crash inside a C library (a GPU driver's) prints the Python stack that reached it
    on stderr instead of a bare "Segmentation fault" (where stderr is a real file)."""
    # stderr captured in memory (a test's runner): nothing to write to
    with contextlib.suppress(io.UnsupportedOperation, ValueError, AttributeError):
        faulthandler.enable()


def emit_json(payload: object) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def show(as_json: bool, payload: object, view: Callable[[], None]) -> None:
    """A command's result, the one fork every command takes: ``payload`` as JSON on
    stdout with ``--json``, otherwise ``view()`` prints it for people (the rich console)."""
    if as_json:
        emit_json(payload)
    else:
        view()
