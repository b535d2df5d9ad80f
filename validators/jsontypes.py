"""The types of the JSON the validator reads and writes.

JSON read from outside (a receipt, an envelope, a snapshot) is ``object`` until
``isinstance`` narrows it; JSON the validator builds is a ``JSONValue``. Python types only:
nothing here is imported at run time by anything heavier than ``typing``.
"""

from __future__ import annotations

from typing import TypeAlias

JSONScalar: TypeAlias = "str | int | float | bool | None"
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
JSONObject: TypeAlias = "dict[str, JSONValue]"
