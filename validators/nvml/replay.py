"""The replay backend: pynvml's call surface answered from a snapshot's ``nvml`` section.

Same function names, same return types (real pynvml ctypes structures are rebuilt from
the recorded fields) and the same ``pynvml.NVMLError_*`` classes, so the checks run the
same code live and replayed. ``calls`` records every call made (for the contract test).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

from imagectl.validators.nvml.calls import ALIAS_TO_NAME, BY_NAME, Call, arg_key, new_struct
from imagectl.validators.nvml.errors import make_error


class ReplayHandle:
    """An opaque device handle, like the ctypes pointer pynvml returns."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<replay GPU {self.index}>"


def _is_error(value: object) -> bool:
    return isinstance(value, dict) and "$error" in value


def build_struct(
    struct_name: str, fields: dict[str, Any], target: ctypes.Structure | None = None
) -> object:
    """Rebuild a pynvml ctypes structure (or fill ``target``) from recorded fields."""
    obj = target if target is not None else getattr(pynvml, struct_name)()
    for fname, ftype, *_bits in obj._fields_:  # (name, type) or (name, type, bit width)
        if fname not in fields or fname == "version":
            continue
        value = fields[fname]
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, list):
            arr = getattr(obj, fname)
            for i, item in enumerate(value[: len(arr)]):
                arr[i] = item
            continue
        if issubclass(ftype, ctypes.Array) and isinstance(value, bytes):
            ctypes.memmove(
                ctypes.addressof(obj) + getattr(type(obj), fname).offset, value, len(value)
            )
            continue
        setattr(obj, fname, value)
    return obj


def _fill(spec: Call, fields: dict[str, object], target: object) -> None:
    """Write the function's own structure layout into the caller's buffer, as the C
    library does: a versioned structure must carry the version nvml.h names for it
    (``Call.version``; driver 580.159.04 answered a version left 0 with
    ARGUMENT_VERSION_MISMATCH), else nothing is written; a buffer of another layout is
    read shifted."""
    if not isinstance(target, ctypes.Structure):
        raise make_error("INVALID_ARGUMENT")
    written = new_struct(spec.name)
    build_struct(spec.struct or "", fields, written)
    names = [f[0] for f in written._fields_]
    if "version" in names and getattr(target, "version", None) != written.version:
        raise make_error("ARGUMENT_VERSION_MISMATCH")
    size = min(ctypes.sizeof(written), ctypes.sizeof(target))
    ctypes.memmove(ctypes.addressof(target), ctypes.addressof(written), size)


class ReplayNvml:
    kind = "replay"

    def __init__(self, nvml_section: dict[str, Any]):
        common = nvml_section.get("common") or {}
        self._data = dict(nvml_section)
        self._data["devices"] = [
            d if _is_error(d) else {**common, **d} for d in nvml_section.get("devices") or []
        ]
        self._initialised = False
        self.calls: list[str] = []

    # -- session ---------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        err = (self._data.get("init") or {}).get("error")
        if err:
            raise make_error(err)
        self._initialised = True

    def nvmlInitWithFlags(self, flags: int = 0) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self._initialised = False

    def nvmlDeviceGetHandleByIndex(self, index: int) -> ReplayHandle:
        self._require_init()
        devices = self._data.get("devices") or []
        if not 0 <= index < len(devices):
            raise make_error("INVALID_ARGUMENT")
        entry = devices[index]
        if _is_error(entry):
            raise make_error(entry["$error"])
        return ReplayHandle(index)

    # -- everything else ----------------------------------------------------------------
    def __getattr__(self, name: str) -> Callable[..., Any]:
        if not name.startswith("nvml"):
            raise AttributeError(name)
        canonical = ALIAS_TO_NAME.get(name, name)

        def call(*args: object) -> object:
            return self._answer(canonical, args)

        call.__name__ = canonical
        return call

    def _require_init(self) -> None:
        if not self._initialised:
            raise make_error("UNINITIALIZED")

    def _answer(self, name: str, args: tuple[Any, ...]) -> object:
        self.calls.append(name)
        self._require_init()
        spec = BY_NAME.get(name)
        if name.startswith("nvmlSystem") or name in ("nvmlDeviceGetCount",):
            table = self._data.get("system") or {}
            if name == "nvmlDeviceGetCount" and name not in table:
                return len(self._data.get("devices") or [])
            rest = args
        else:
            if not args or not isinstance(args[0], ReplayHandle):
                raise make_error("INVALID_ARGUMENT")
            table = self._data["devices"][args[0].index]
            rest = args[1:]
        if name not in table:
            raise make_error("FUNCTION_NOT_FOUND")
        value = table[name]
        if _is_error(value):
            raise make_error(value["$error"])
        kind = spec.kind if spec else "value"
        if kind == "fill" and spec is not None:
            _fill(spec, value, rest[0] if rest else None)
            return pynvml.NVML_SUCCESS
        if kind == "fields":
            return self._fields(value, rest[0])
        if spec is not None and spec.args:
            key = arg_key(tuple(rest))
            if not isinstance(value, dict) or key not in value:
                raise make_error("INVALID_ARGUMENT")
            value = value[key]
            if _is_error(value):
                raise make_error(value["$error"])
        if spec is not None and spec.struct and isinstance(value, dict):
            return build_struct(spec.struct, value)
        if isinstance(value, list) and name == "nvmlDeviceGetRemappedRows":
            return tuple(value)
        return value

    def _fields(self, table: dict[str, Any], field_ids: list[object]) -> object:
        arr = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            fid = fid[0] if isinstance(fid, tuple) else fid
            arr[i].fieldId = fid
            value = table.get(str(fid), {"$error": "NOT_SUPPORTED"})
            if _is_error(value):
                arr[i].nvmlReturn = getattr(pynvml, "NVML_ERROR_" + value["$error"], 999)
                continue
            arr[i].nvmlReturn = pynvml.NVML_SUCCESS
            arr[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            arr[i].value.ullVal = int(value)
        return arr
