"""The JSON Schemas shipped with the validator, generated from their pydantic models.

``python -m imagectl.validators.schemas`` rewrites ``schema/*.schema.json``; a test fails
when a shipped file differs from its model, so the documents never drift from the code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from imagectl.validators.expectations import expect_schema
from imagectl.validators.receipt import receipt_schema
from imagectl.validators.snapshot import snapshot_schema

SCHEMA_DIR = Path(__file__).parent / "schema"


def generators() -> dict[str, Callable[[], dict[str, object]]]:
    return {
        "receipt.schema.json": receipt_schema,
        "snapshot.schema.json": snapshot_schema,
        "expect.schema.json": expect_schema,
    }


def render(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main() -> None:
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, make in generators().items():
        (SCHEMA_DIR / name).write_text(render(make()), encoding="utf-8")
        print(SCHEMA_DIR / name)


if __name__ == "__main__":
    main()
