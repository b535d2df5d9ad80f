"""What a check calls NVML through: the ``pynvml`` module itself, the live wrapper over it
(``live.LiveNvml``), a recording replayed (``replay.ReplayNvml``), or the proxy that tags
errors with their call (``context.NamedCalls``). Each answers ``nvml.nvmlXxx(...)``."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from types import ModuleType

    from imagectl.validators.context import NamedCalls
    from imagectl.validators.nvml.live import LiveNvml
    from imagectl.validators.nvml.replay import ReplayNvml

NvmlBackend: TypeAlias = "ModuleType | LiveNvml | ReplayNvml | NamedCalls"
