"""The one type of a saved signal disposition: what ``signal.signal`` returns and takes
back (a handler, ``SIG_DFL``/``SIG_IGN``, or None for one not set from Python). Every
module that installs a handler and restores the old one afterwards (the Packer runner,
the command deadline, the embedded run's child processes) keeps its saved handlers as
this type."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
