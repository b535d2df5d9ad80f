"""The one NVML boundary of the validator.

Checks receive a backend object and call pynvml's own function names on it
(``nvml.nvmlDeviceGetTemperature(handle, 0)``). Two backends implement that surface:

- ``LiveNvml`` (``live.py``) wraps the real ``pynvml`` and resolves versioned names
  (``_v2``/``_v3``, ClocksEventReasons vs ThrottleReasons) in one place;
- ``ReplayNvml`` (``replay.py``) answers the same calls from a snapshot and raises the
  same ``pynvml.NVMLError_*`` classes for unsupported or failing calls.

``calls.py`` is the list of calls the checks make; ``capture.py`` walks it to write the
``nvml`` section of a snapshot, so a snapshot holds exactly what the checks read.
"""

from __future__ import annotations

from imagectl.validators.nvml.errors import (
    error_label,
    error_name,
    is_unsupported,
    make_error,
)
from imagectl.validators.nvml.fields import field_value
from imagectl.validators.nvml.live import LiveNvml
from imagectl.validators.nvml.replay import ReplayNvml

__all__ = [
    "LiveNvml",
    "ReplayNvml",
    "error_label",
    "error_name",
    "field_value",
    "is_unsupported",
    "make_error",
]
