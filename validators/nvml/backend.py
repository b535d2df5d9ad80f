"""What a check calls NVML through: the ``pynvml`` module itself, the live wrapper over it
(``live.LiveNvml``), a recording replayed (``replay.ReplayNvml``), or a proxy over one of
those that forwards every call (``context.NamedCalls``, which tags errors with their
call). Each answers ``nvml.nvmlXxx(...)`` as pynvml does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from types import ModuleType

    from imagectl.validators.nvml.live import LiveNvml
    from imagectl.validators.nvml.replay import ReplayNvml


class NvmlProxy(Protocol):
    """A wrapper that forwards each ``nvml*`` call (``context.NamedCalls``; named by this
    shape rather than imported, as the context imports the nvml package). What a call
    answers is pynvml's: a number, a ctypes structure, a tuple."""

    kind: str

    def __getattr__(self, name: str) -> Callable[..., Any]: ...


NvmlBackend: TypeAlias = "ModuleType | LiveNvml | ReplayNvml | NvmlProxy"
