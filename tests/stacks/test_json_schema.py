"""The shipped stack JSON Schema equals the one generated from the models, and every
shipped stack validates against it (what an editor would check)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from imagectl.stacks.jsonschema import render

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "images" / "schema" / "stack.schema.json"


def test_shipped_schema_is_current() -> None:
    assert SCHEMA.read_text() == render(), (
        "images/schema/stack.schema.json is stale: regenerate it with "
        "python -c 'from imagectl.stacks.jsonschema import render; print(render(), end=\"\")'"
        " > images/schema/stack.schema.json"
    )


def test_shipped_stacks_validate_against_the_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    for path in sorted((REPO / "images" / "stacks").glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_schema_rejects_unknown_keys() -> None:
    schema = json.loads(SCHEMA.read_text())
    doc = yaml.safe_load((REPO / "images" / "stacks" / "local.yaml").read_text())
    doc["kernal"] = "typo"
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as exc:
        assert "kernal" in exc.message
    else:
        raise AssertionError("an unknown key must not validate")
