"""The stack file JSON Schema (images/schema/stack.schema.json), generated from the
pydantic models so it cannot drift from them. Editors use it for completion and checks
(`# yaml-language-server: $schema=../schema/stack.schema.json`)."""

from __future__ import annotations

import json

from imagectl.stacks.schema import Stack


def stack_json_schema() -> dict[str, object]:
    """The schema document (pydantic's, with its $schema and $id)."""
    schema = Stack.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://imagectl.dev/schema/stack.schema.json"
    return schema


def render() -> str:
    return json.dumps(stack_json_schema(), indent=2, sort_keys=True) + "\n"
