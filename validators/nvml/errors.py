"""NVML errors by name, without calling into libnvidia-ml.

``str(pynvml.NVMLError)`` may call ``nvmlErrorString`` in the C library, which is absent
on a host without the driver; these helpers only use pynvml's Python constants.
"""

from __future__ import annotations

import pynvml

_BY_VALUE: dict[int, str] = {
    getattr(pynvml, n): n.removeprefix("NVML_ERROR_")
    for n in dir(pynvml)
    if n.startswith("NVML_ERROR_") and isinstance(getattr(pynvml, n), int)
}

# Calls the driver or GPU does not offer: a ``skip`` with the reason, never a crash.
UNSUPPORTED = {"NOT_SUPPORTED", "FUNCTION_NOT_FOUND"}


def error_name(exc: BaseException) -> str:
    """``NVMLError_NotSupported`` -> ``NOT_SUPPORTED``; other exceptions -> class name."""
    value = getattr(exc, "value", None)
    if isinstance(exc, pynvml.NVMLError) and isinstance(value, int):
        return _BY_VALUE.get(value, f"CODE_{value}")
    return type(exc).__name__


def error_label(exc: BaseException) -> str:
    """A readable label: ``NVMLError_LibraryNotFound (NVML Shared Library Not Found)``."""
    if isinstance(exc, pynvml.NVMLError):
        text = pynvml.NVMLError._errcode_to_string.get(exc.value, error_name(exc))
        return f"{type(exc).__name__} ({text})"
    return f"{type(exc).__name__}: {exc}"


def make_error(name: str) -> pynvml.NVMLError:
    """``"NOT_SUPPORTED"`` -> ``pynvml.NVMLError_NotSupported()`` (unknown names -> UNKNOWN)."""
    value = getattr(pynvml, f"NVML_ERROR_{name.upper()}", pynvml.NVML_ERROR_UNKNOWN)
    return pynvml.NVMLError(value)


def is_unsupported(exc: BaseException) -> bool:
    return isinstance(exc, pynvml.NVMLError) and error_name(exc) in UNSUPPORTED


def known_error_names() -> list[str]:
    return sorted(_BY_VALUE.values())
