"""The live backend: the real pynvml, with versioned names resolved in one place."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

from imagectl.validators.nvml.calls import ALIAS_TO_NAME, BY_NAME
from imagectl.validators.nvml.errors import error_name


class LiveNvml:
    """``nvml.nvmlDeviceGetX(...)`` -> ``pynvml.nvmlDeviceGetX(...)``.

    A canonical name whose C symbol the driver lacks (``NVMLError_FunctionNotFound``) or
    whose Python binding is missing falls back to its aliases from ``calls.py``, e.g.
    ``nvmlDeviceGetCurrentClocksEventReasons`` -> ``...ThrottleReasons`` on older drivers.
    Constants and error classes are read from ``pynvml`` directly by the checks.
    """

    kind = "live"

    def __init__(self) -> None:
        self._resolved: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if not name.startswith("nvml"):
            raise AttributeError(name)
        fn = self._resolved.get(name)
        if fn is None:
            fn = self._resolve(name)
            self._resolved[name] = fn
        return fn

    def _resolve(self, name: str) -> Callable[..., Any]:
        canonical = ALIAS_TO_NAME.get(name, name)
        call = BY_NAME.get(canonical)
        if call is not None and call.kind == "fill":
            return _by_reference(canonical)
        names = [canonical, *(call.aliases if call else ())]
        candidates = [getattr(pynvml, n) for n in names if hasattr(pynvml, n)]
        if not candidates:
            raise AttributeError(f"pynvml has no function {name}")
        if len(candidates) == 1:
            return candidates[0]

        def with_fallback(*args: object) -> object:
            last: BaseException | None = None
            for fn in candidates:
                try:
                    return fn(*args)
                except pynvml.NVMLError as exc:
                    if error_name(exc) != "FUNCTION_NOT_FOUND":
                        raise
                    last = exc
            assert last is not None
            raise last

        return with_fallback


def _by_reference(name: str) -> Callable[..., Any]:
    """A function that fills a caller's structure (``nvml.h``: ``nvmlX_t *``), called with
    a pointer to it. nvidia-ml-py's own wrappers of these (13.615.71:
    nvmlDeviceGetGpuFabricInfoV, nvmlDeviceGetGpuFabricInfo,
    nvmlDeviceGetSramEccErrorStatus) hand ctypes the structure itself, which ctypes passes
    by value: on a real H200 with driver 580.159.04 (2026-11-28) ...GpuFabricInfoV crashed
    the process (SIGSEGV) and ...SramEccErrorStatus answered ARGUMENT_VERSION_MISMATCH for
    every version, the driver reading a pointer that was never passed."""

    def fill(handle: object, struct: ctypes.Structure) -> int:
        fn = pynvml._nvmlGetFunctionPointer(name)  # FUNCTION_NOT_FOUND where the driver lacks it
        ret = fn(handle, ctypes.byref(struct))
        pynvml._nvmlCheckReturn(ret)
        return int(pynvml.NVML_SUCCESS)

    fill.__name__ = name
    return fill
