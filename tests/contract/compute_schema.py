"""The Compute Engine v1 API description available offline: ``google-cloud-compute``'s
message types, generated from the Compute discovery document. Each field keeps its JSON
name (``DESCRIPTOR.fields[].json_name``) and the discovery document's description,
``[Output Only]`` / ``[Input Only]`` included, in the class docstring."""

from __future__ import annotations

import functools
import re
from typing import Any

_ATTR = re.compile(r"^ {8}(\w+) \(")


@functools.cache
def message(name: str) -> Any:
    from google.cloud import compute_v1

    return getattr(compute_v1, name)


@functools.cache
def annotations(name: str) -> dict[str, set[str]]:
    """field name -> {"output", "input"} as the docstring marks it."""
    doc = message(name).__doc__ or ""
    out: dict[str, set[str]] = {}
    current = None
    for line in doc.splitlines():
        match = _ATTR.match(line)
        if match:
            current = match.group(1)
            out[current] = set()
            continue
        if current is None:
            continue
        if "[Output Only]" in line or "Output only." in line:
            out[current].add("output")
        if "[Input Only]" in line:
            out[current].add("input")
    return out


def problems(body: Any, type_name: str, *, direction: str, path: str = "") -> list[str]:
    """What in ``body`` (JSON) the API's ``type_name`` does not allow: unknown fields,
    and output-only fields in a request / input-only fields in a response."""
    if not isinstance(body, dict):
        return []
    descriptor = message(type_name).pb().DESCRIPTOR
    by_json = {f.json_name: f for f in descriptor.fields}
    marks = annotations(type_name)
    found: list[str] = []
    for key, value in body.items():
        field = by_json.get(key)
        where = f"{path}{type_name}.{key}"
        if field is None:
            found.append(f"{where}: not a field of {type_name}")
            continue
        flags = marks.get(field.name, set())
        if direction == "request" and "output" in flags and "input" not in flags:
            found.append(f"{where}: output only, sent in a request")
        if direction == "response" and "input" in flags:
            found.append(f"{where}: input only, returned in a response")
        sub = field.message_type
        if sub is None:
            continue
        if sub.GetOptions().map_entry:  # an aggregated list's items: scope -> scoped list
            sub = sub.fields_by_name["value"].message_type
            if sub is None or not isinstance(value, dict):
                continue
            value = list(value.values())
        items = value if isinstance(value, list) else [value]
        for item in items:
            found += problems(item, sub.name, direction=direction, path=f"{where} > ")
    return found
