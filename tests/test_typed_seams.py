"""The seams between the stages are typed.

Every public function of the stage packages (building, validation, promotion,
orchestrate, stacks) says what it returns, and none returns a bag of ``dict[str, Any]``:
what a stage hands the next is a frozen dataclass or a pydantic model, and JSON exists only
at the edges (``--json``, the Packer and Ansible files, the catalog's columns). The
serializers that make those edges are listed here, one by one, so that a new one is a
choice someone wrote down. mypy checks the same packages with every flag of ``--strict``
(pyproject.toml), and the count of ``Any`` in them may only go down.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: mypy's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("building", "validation", "promotion", "orchestrate", "stacks")

# The JSON edges: what each turns into plain data, and where that goes.
SERIALIZERS = {
    "promotion/query.py:catalog_status",  # status --json
    # a data file read as plain data (helper A's; a typed model of regions.yaml would end it)
    "stacks/locations.py:cloud_locations",  # images/compat/regions.yaml, one cloud's part
}


def _public_functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(``package/file.py:[Class.]name``, node) of every public function and method of a
    public class, module level (nested functions are no seam)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / "pipeline" / package).rglob("*.py")):
            rel = path.relative_to(ROOT / "pipeline").as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if not node.name.startswith("_"):
                        found.append((f"{rel}:{node.name}", node))
                elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                            not item.name.startswith("_") or item.name == "__init__"
                        ):
                            found.append((f"{rel}:{node.name}.{item.name}", item))
    return found


def _bag(annotation: ast.expr) -> bool:
    """``dict[str, Any]`` (or ``Dict``/``Mapping``/``MutableMapping``) anywhere inside the
    annotation: ``list[dict[str, Any]]``, ``dict[str, Any] | None`` and a string form."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    for node in ast.walk(annotation):
        if not isinstance(node, ast.Subscript):
            continue
        name = (
            node.value.attr
            if isinstance(node.value, ast.Attribute)
            else getattr(node.value, "id", "")
        )
        if name not in ("dict", "Dict", "Mapping", "MutableMapping"):
            continue
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(args) == 2 and _is_any(args[1]):
            return True
    return False


def _is_any(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def test_the_walk_finds_the_stage_functions() -> None:
    names = {name for name, _ in _public_functions()}
    assert len(names) > 150  # every stage package, not an empty walk
    for known in (
        "building/stage.py:build_image",
        "validation/stage.py:validate_image",
        "promotion/gate.py:check_gate",
        "orchestrate/run.py:run_local",
        "stacks/resolve.py:ResolvedStack.pins",
    ):
        assert known in names


def test_every_public_function_says_what_it_returns() -> None:
    missing = [
        f"{name} (line {node.lineno})"
        for name, node in _public_functions()
        if node.returns is None and not name.endswith(".__init__")
    ]
    assert not missing, "public functions without a return annotation: " + ", ".join(missing)


def test_no_public_function_returns_a_dict_of_any_but_the_listed_serializers() -> None:
    bags = {
        name
        for name, node in _public_functions()
        if node.returns is not None and _bag(node.returns)
    }
    unlisted = sorted(bags - SERIALIZERS)
    assert not unlisted, (
        "these return dict[str, Any]; return a frozen dataclass or a model, or (a JSON edge "
        "only) add it to SERIALIZERS with where its output goes: " + ", ".join(unlisted)
    )
    stale = sorted(SERIALIZERS - bags)
    assert not stale, "SERIALIZERS names functions that return no dict[str, Any] (any more): " + (
        ", ".join(stale)
    )


def test_the_bag_detector_catches_its_forms() -> None:
    def returns(src: str) -> ast.expr:
        node = ast.parse(f"def f() -> {src}: ...").body[0]
        assert isinstance(node, ast.FunctionDef) and node.returns is not None
        return node.returns

    for caught in ("dict[str, Any]", "list[dict[str, Any]]", "dict[str, Any] | None",
                   "typing.Dict[str, typing.Any]", "'dict[str, Any]'",
                   "tuple[str, Mapping[str, Any]]"):  # fmt: skip
        assert _bag(returns(caught)), caught
    for fine in ("dict[str, str]", "dict[str, object]", "list[Any]", "Pins"):
        assert not _bag(returns(fine)), fine


# The flags `mypy --strict` turns on that a per-module section can set (the rest are global).
GLOBAL_ONLY = {"warn_redundant_casts", "warn_unused_configs"}


def test_mypy_checks_the_stage_packages_with_every_strict_flag() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "mypy", "--help"], capture_output=True, text=True, check=True
    ).stdout
    # "  --strict   Strict mode; enables the following flags: --a, --b-\n   c, ..." up to
    # the next option's line
    section = re.search(r"\n  --strict +(.*?)\n  -", help_text, re.S)
    assert section is not None, "mypy --help no longer describes --strict"
    text = re.sub(r"-\s*\n\s*", "-", section.group(1))  # a flag broken over two lines
    flags = {f.replace("-", "_") for f in re.findall(r"--([a-z-]+)", text)}
    assert "disallow_untyped_defs" in flags and "warn_return_any" in flags  # parsed

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    wanted = {f"imagectl.{p}" for p in PACKAGES} | {f"imagectl.{p}.*" for p in PACKAGES}
    strict = [o for o in config["overrides"] if wanted <= set(o["module"])]
    assert strict, "no [[tool.mypy.overrides]] section names every stage package"
    per_module = flags - GLOBAL_ONLY
    unset = sorted(f for f in per_module if strict[0].get(f) is not True)
    assert not unset, f"--strict flags the stage packages' section does not set: {unset}"
    for flag in flags & GLOBAL_ONLY - {"warn_unused_configs"}:
        assert config.get(flag) is True, flag


def test_make_typecheck_runs_mypy_strict_on_the_stage_packages() -> None:
    """``make typecheck`` (which ``make test`` runs) runs ``mypy --strict`` itself on the
    same packages: the per-module flags above miss an implicit re-export from a module
    outside them, which --strict refuses."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    strict = re.search(r"^STRICT := (.+)$", makefile, re.M)
    assert strict is not None and tuple(strict.group(1).split()) == PACKAGES
    recipe = makefile.split("\ntypecheck:", 1)[1].split("\n\n", 1)[0]
    assert "--strict" in recipe and "$(STRICT)" in recipe
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "typecheck" in test_recipe


def _any_count() -> int:
    count = 0
    for package in PACKAGES:
        for path in (ROOT / "pipeline" / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            count += sum(
                1 for node in ast.walk(tree) if isinstance(node, ast.expr) and _is_any(node)
            )
    return count


# ``Any`` (Name or .Any attribute) in the five packages: 109 before the seams were typed,
# 16 after (catalog_status's status document and the stack schema's section hook).
ANY_CEILING = 16


def test_any_in_the_stage_packages_only_goes_down() -> None:
    count = _any_count()
    assert count <= ANY_CEILING, (
        f"{count} uses of Any in pipeline/{{{','.join(PACKAGES)}}} (ceiling {ANY_CEILING}): "
        "type the value instead (a dataclass, a model, object for opaque JSON)"
    )
