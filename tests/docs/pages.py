"""The docs site's tables that come from data, rendered into their pages.

    python -m tests.docs.pages           # rewrite every generated table in docs/
    python -m tests.docs.pages --check   # exit 1 naming each page that is not its rendering

A page holds a generated table between ``<!-- generated: NAME ... -->`` and
``<!-- end generated: NAME -->``; everything outside those two lines is written by hand.
The tables and where their rows come from:

- ``checks`` (docs/validator-checks.md): the validator's one check registry
  (``imagectl.validators.registry``), every module of the validator imported: id, title,
  severity, where it runs, scope, profiles and the action its failure recommends.
- ``thresholds`` (docs/validator-thresholds.md): ``validators/data/thresholds.yaml``, each
  number with who sets it (NVIDIA, or imagectl policy with its reason) and its source.
- ``stack`` (docs/stack-reference.md): every key of a stack file, from the stack schema
  (``imagectl.stacks.jsonschema``, the pydantic models): type, default, what it sets.
- ``environment`` (docs/environment.md): ``docs/data/environment.yaml``, every
  ``IMAGECTL_*`` variable the code reads (tests/docs/test_docs_pages.py holds that list to
  the code).

``tests/docs/test_docs_pages.py`` fails when a committed page differs from what this
writes, so a new check, threshold or variable cannot be left out of the docs.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from imagectl.validators.registry import ALL_PROFILES, Runs, Spec

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
ENVIRONMENT = DOCS / "data" / "environment.yaml"
COMMAND = "python -m tests.docs.pages"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def registered_checks() -> list[Spec]:
    """Every check a receipt can hold: each module of the validator imported (a check is
    declared in the module that judges it), the runner's checks in their run order, then
    the others by where they run and by id (the same order whatever was imported first)."""
    import imagectl.validators as validators
    from imagectl.validators.checks import REGISTRY

    for module in pkgutil.walk_packages(validators.__path__, "imagectl.validators."):
        importlib.import_module(module.name)
    order = {runs: i for i, runs in enumerate(Runs)}
    runner = [s for s in REGISTRY.values() if s.runs is Runs.NVML]
    others = sorted(
        (s for s in REGISTRY.values() if s.runs is not Runs.NVML),
        key=lambda s: (order[s.runs], s.id),
    )
    return [*runner, *others]


def _members(spec: Spec) -> str:
    members = sorted(check_id for check_id, _ in spec.members()) if spec.members else []
    if not members or len(members) > 20:
        return ""
    return "; one of " + ", ".join(f"`{m}`" for m in members)


def checks_table() -> list[str]:
    rows = [
        "| id | title | severity | runs | scope | profiles | action |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in registered_checks():
        check_id = f"{spec.id}*" if spec.is_family else spec.id
        scope = "per GPU" if spec.per_gpu else "host"
        profiles = "all" if spec.profiles == ALL_PROFILES else "/".join(sorted(spec.profiles))
        title = _cell(spec.title + _members(spec))
        rows.append(
            f"| `{check_id}` | {title} | {spec.severity.value} | {spec.runs.value} | {scope} "
            f"| {profiles} | {spec.failure_action.value} |"
        )
    return rows


def thresholds_table() -> list[str]:
    from imagectl.validators.catalogs import thresholds

    rows = ["| threshold | value | set by | source |", "|---|---|---|---|"]
    for t in sorted(thresholds().values.values(), key=lambda t: t.key):
        who = "NVIDIA" if t.authority == "nvidia" else f"imagectl policy: {t.reason}"
        rows.append(
            f"| `{t.key}` | {t.value:g} {_cell(t.unit)} | {_cell(who)} | {_cell(t.source)} |"
        )
    return rows


def _type(node: dict[str, Any], defs: dict[str, Any]) -> tuple[str, str | None]:
    """A schema node's type as a reader writes it, and the $defs name of its object."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        target = defs[name]
        if "enum" in target:
            return " \\| ".join(f"`{v}`" for v in target["enum"]), None
        return "mapping", name
    if "anyOf" in node:
        kinds = [_type(n, defs) for n in node["anyOf"] if n.get("type") != "null"]
        nested = next((ref for _, ref in kinds if ref), None)
        text = " or ".join(kind for kind, _ in kinds)
        return (f"{text} or null" if len(kinds) < len(node["anyOf"]) else text), nested
    if "const" in node:
        return f"`{node['const']}`", None
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"]), None
    kind = node.get("type", "any")
    if kind == "array":
        item, _ = _type(node.get("items", {}), defs)
        return f"list of {item}", None
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        value, _ = _type(node["additionalProperties"], defs)
        return f"mapping of {value}", None
    if kind == "object" and node.get("patternProperties"):
        values = {_type(v, defs)[0] for v in node["patternProperties"].values()}
        return "mapping of " + " or ".join(sorted(values)), None
    return str(kind), None


def _stack_rows(
    obj: dict[str, Any], defs: dict[str, Any], prefix: str, seen: tuple[str, ...]
) -> list[str]:
    rows = []
    required = set(obj.get("required", []))
    for key, node in obj.get("properties", {}).items():
        path = f"{prefix}{key}"
        kind, nested = _type(node, defs)
        if key in required:
            default = "required"
        elif "default" in node:
            default = f"`{json.dumps(node['default'])}`" if node["default"] != [] else "`[]`"
        else:
            default = "—"
        description = node.get("description") or ""
        if nested and not description:
            description = defs[nested].get("description", "")
        rows.append(f"| `{path}` | {kind} | {_cell(default)} | {_cell(description)} |")
        if nested and nested not in seen:
            rows += _stack_rows(defs[nested], defs, f"{path}.", (*seen, nested))
    return rows


def stack_table() -> list[str]:
    from imagectl.stacks.jsonschema import stack_json_schema

    schema = stack_json_schema()
    rows = ["| key | type | default | what it sets |", "|---|---|---|---|"]
    return rows + _stack_rows(schema, schema["$defs"], "", ())


def environment_variables() -> list[dict[str, str]]:
    doc = yaml.safe_load(ENVIRONMENT.read_text(encoding="utf-8"))
    entries: list[dict[str, str]] = doc["variables"]
    return entries


def environment_table() -> list[str]:
    rows = ["| variable | what it sets | default |", "|---|---|---|"]
    for entry in environment_variables():
        rows.append(f"| `{entry['name']}` | {_cell(entry['sets'])} | {_cell(entry['default'])} |")
    return rows


TABLES: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "checks": ("validator-checks.md", checks_table),
    "thresholds": ("validator-thresholds.md", thresholds_table),
    "environment": ("environment.md", environment_table),
    "stack": ("stack-reference.md", stack_table),
}


def begin(name: str) -> str:
    return f"<!-- generated: {name} (from data: {COMMAND}; do not edit by hand) -->"


def end(name: str) -> str:
    return f"<!-- end generated: {name} -->"


def block(name: str) -> str:
    return "\n".join([begin(name), *TABLES[name][1](), end(name)])


def rewrite(text: str, name: str) -> str:
    """``text`` with table ``name``'s block rendered again; the rest as it was."""
    pattern = re.compile(re.escape(begin(name)) + r".*?" + re.escape(end(name)), re.S)
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"expected one generated {name!r} block: {begin(name)} ... {end(name)}")
    return pattern.sub(lambda _: block(name), text)


def stale() -> list[str]:
    """The pages whose generated tables are not what the data renders."""
    found = []
    for name, (page, _) in TABLES.items():
        text = (DOCS / page).read_text(encoding="utf-8")
        if rewrite(text, name) != text:
            found.append(f"docs/{page} ({name})")
    return found


def main(argv: list[str]) -> int:
    if "--check" in argv:
        pages = stale()
        for page in pages:
            print(f"stale: {page}: run {COMMAND}", file=sys.stderr)
        return 1 if pages else 0
    for name, (page, _) in TABLES.items():
        path = DOCS / page
        path.write_text(rewrite(path.read_text(encoding="utf-8"), name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
