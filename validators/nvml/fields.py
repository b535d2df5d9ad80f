"""Field values (``nvmlDeviceGetFieldValues``): one id at a time, as a plain number."""

from __future__ import annotations

import pynvml

from imagectl.validators.nvml.backend import NvmlBackend

_VALUE_ATTR = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def field_value(nvml: NvmlBackend, handle: object, field_id: int) -> float | int:
    """The value of one field; raises the field's own NVMLError when it has one."""
    (entry,) = nvml.nvmlDeviceGetFieldValues(handle, [field_id])
    if entry.nvmlReturn != pynvml.NVML_SUCCESS:
        exc = pynvml.NVMLError(entry.nvmlReturn)
        exc.nvml_call = "nvmlDeviceGetFieldValues"  # type: ignore[attr-defined]
        exc.nvml_args = (handle, [field_id])  # type: ignore[attr-defined]
        raise exc
    value: float | int = getattr(entry.value, _VALUE_ATTR.get(entry.valueType, "ullVal"))
    return value
