"""Capture the ``nvml`` section of a snapshot by walking ``calls.py`` on a backend."""

from __future__ import annotations

import contextlib
import ctypes

import pynvml

from imagectl.validators.jsontypes import JSONValue
from imagectl.validators.nvml.backend import NvmlBackend
from imagectl.validators.nvml.calls import (
    DEVICE_CALLS,
    SYSTEM_CALLS,
    Call,
    arg_key,
    new_struct,
)
from imagectl.validators.nvml.errors import error_name


def to_jsonable(value: object) -> JSONValue:
    """ctypes structures -> dicts of their fields, arrays -> lists, bytes -> str."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, ctypes.Structure | ctypes.Union):
        # "version" is the structure version the caller sets, not a value
        return {
            f[0]: to_jsonable(getattr(value, f[0])) for f in value._fields_ if f[0] != "version"
        }
    if isinstance(value, ctypes.Array | list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def _err(exc: BaseException) -> dict[str, JSONValue]:
    return {"$error": error_name(exc)}


def _one(
    nvml: NvmlBackend, call: Call, head: tuple[object, ...], args: tuple[object, ...]
) -> JSONValue:
    fn = getattr(nvml, call.name)
    try:
        if call.kind == "fill":
            info = new_struct(call.name)
            fn(*head, info)
            return to_jsonable(info)
        if call.kind == "fields":
            (entry,) = fn(*head, list(args))
            if entry.nvmlReturn != pynvml.NVML_SUCCESS:
                return _err(pynvml.NVMLError(entry.nvmlReturn))
            return to_jsonable(entry.value.ullVal)
        return to_jsonable(fn(*head, *args))
    except pynvml.NVMLError as exc:
        return _err(exc)


def _capture_call(
    nvml: NvmlBackend, call: Call, head: tuple[object, ...], links: set[int]
) -> JSONValue:
    if not call.args:
        return _one(nvml, call, head, ())
    out: dict[str, JSONValue] = {}
    for args in call.args:
        if call.name == "nvmlDeviceGetNvLinkErrorCounter" and args[0] not in links:
            continue
        out[arg_key(args)] = _one(nvml, call, head, args)
    if not out:  # no NVLink link to ask about
        return {"$error": "NOT_SUPPORTED"}
    values = list(out.values())
    # one error for every argument set (e.g. no NVLink at all): store it once
    errors = [v["$error"] for v in values if isinstance(v, dict) and "$error" in v]
    if (
        values
        and len(errors) == len(values)
        and len({str(e) for e in errors}) == 1  # error names (strings)
        and call.kind != "fields"
    ):
        return values[0]
    return out


def capture_nvml(nvml: NvmlBackend) -> dict[str, JSONValue]:
    """Everything the checks read, per GPU. Never raises on NVML errors: records them."""
    try:
        nvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"init": {"error": error_name(exc)}, "system": {}, "devices": []}
    try:
        system = {c.name: _capture_call(nvml, c, (), set()) for c in SYSTEM_CALLS}
        count = system.get("nvmlDeviceGetCount")
        devices: list[JSONValue] = []
        for index in range(count if isinstance(count, int) else 0):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except pynvml.NVMLError as exc:
                devices.append(_err(exc))
                continue
            entry: dict[str, JSONValue] = {}
            links: set[int] = set()
            for call in DEVICE_CALLS:
                if call.fallback_for and entry.get(call.fallback_for) != {
                    "$error": "FUNCTION_NOT_FOUND"
                }:
                    continue  # the newer function answered (or failed otherwise)
                state = _capture_call(nvml, call, (handle,), links)
                if state == {"$error": "FUNCTION_NOT_FOUND"}:
                    continue  # absent means the same in replay: a function the driver lacks
                entry[call.name] = state
                if (
                    call.name == "nvmlDeviceGetNvLinkState"
                    and isinstance(state, dict)
                    and "$error" not in state
                ):
                    links = {int(k) for k, v in state.items() if not isinstance(v, dict)}
            devices.append(entry)
        return {"init": {"error": None}, "system": system, "devices": devices}
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            nvml.nvmlShutdown()
