"""Numbers a person types (deadlines, timeouts, counts, windows), checked once: finite,
inside the bounds that make sense for what they count, else exit 2 with one paragraph.

``click.FloatRange`` lets ``nan`` through (every comparison with it is false) and, without
an upper bound, ``inf``: ``--deadline inf`` ended in an OverflowError traceback (the
timer cannot hold it) and ``--deadline nan`` "ran past its deadline of nan s". Every
numeric option of the command line is a ``Bounded`` (``tests/cli/test_numbers.py``
enumerates them), and a number from the environment goes through ``checked``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import click

from imagectl.core.errors import UserError

WEEK_S = 7 * 86400  # the longest any whole command may be given (a deadline, a wait)


def checked(
    value: object,
    *,
    what: str,
    low: float,
    high: float,
    unit: str = "",
    integer: bool = False,
    note: str = "",
) -> float:
    """``value`` (a number, or its text) as a finite number from ``low`` to ``high``
    (an int with ``integer``); UserError naming ``what``, the value and the bounds."""
    text = str(value).strip()
    number: float = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = value
    else:
        with contextlib.suppress(ValueError):  # not a number: refused below
            number = float(text)
    if not math.isfinite(number) or not low <= number <= high or (integer and number % 1):
        kind = "a whole number" if integer else "a number"
        of = f" of {unit}" if unit else ""
        raise UserError(
            f"{what} {text[:40]!r} is not {kind}{of} from {low:g} to {high:g}"
            + (f" ({note})" if note else ""),
            hint=f"Give {what} a value in that range",
        )
    return int(number) if integer else float(number)


class Bounded(click.ParamType):
    """A click type: a finite number from ``low`` to ``high`` (``checked``)."""

    def __init__(
        self, low: float, high: float, *, unit: str = "", integer: bool = False, note: str = ""
    ) -> None:
        self.low, self.high, self.unit, self.integer, self.note = low, high, unit, integer, note
        self.name = "integer" if integer else "float"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "N" if self.integer else (self.unit.upper() or "NUMBER")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        what = param.opts[0] if param is not None and param.opts else "the value"
        return checked(
            value, what=what, low=self.low, high=self.high, unit=self.unit,
            integer=self.integer, note=self.note,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"Bounded({self.low:g}, {self.high:g})"
