"""docs/architecture.md is true to the code: every boundary its table
states names the tests that hold it, and those tests exist; every stage entry function
it names imports; every repository path it names exists. A boundary that loses its test,
a renamed entry function or a moved file fails here instead of drifting silently."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
REPO_PATH = re.compile(r"`((?:pipeline|validators|tests|images|playbooks|docs)/[^`<>{}*\s:]*)")


def table(text: str, header: str) -> list[list[str]]:
    """The body rows (cells) of the Markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def unheld_boundaries(text: str, repo: Path) -> list[str]:
    """Rows of the boundary table that name no test, or a test that is not there."""
    problems = []
    for row in table(text, "| Boundary | Layer | Rule | Held by |"):
        refs = TEST_REF.findall(row[-1])
        if not refs:
            problems.append(f"{row[0]}: names no test that holds it")
        for file, name in refs:
            path = repo / file
            if not path.is_file():
                problems.append(f"{row[0]}: {file} does not exist")
            elif name not in _defined(path):
                problems.append(f"{row[0]}: {file} has no {name}")
    return problems


def test_every_boundary_names_the_tests_that_hold_it() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(table(text, "| Boundary | Layer | Rule | Held by |")) >= 10
    problems = unheld_boundaries(text, REPO)
    assert not problems, "docs/architecture.md's boundary table:\n" + "\n".join(problems)


def test_a_boundary_without_its_test_is_found() -> None:
    text = (
        "| Boundary | Layer | Rule | Held by |\n|---|---|---|---|\n"
        "| A | `a/` | r | `tests/test_import_graph.py::test_a_forbidden_import_is_found` |\n"
        "| B | `b/` | r | nothing yet |\n"
        "| C | `c/` | r | `tests/test_import_graph.py::test_gone` |\n"
        "| D | `d/` | r | `tests/nowhere.py::test_x` |\n"
    )
    assert unheld_boundaries(text, REPO) == [
        "B: names no test that holds it",
        "C: tests/test_import_graph.py has no test_gone",
        "D: tests/nowhere.py does not exist",
    ]


def _resolve(dotted: str) -> object:
    """``promotion.promote`` -> the attribute of the longest importable module above it
    (the package's ``promote`` function, not its module of the same name)."""
    parts = ["imagectl", *dotted.split(".")]
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_stage_entry_function_exists() -> None:
    rows = table(DOC.read_text(encoding="utf-8"), "| Stage | Entry | Called by |")
    names = [n for row in rows for n in re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", row[1])]
    assert len(names) >= 10
    missing = []
    for name in names:
        try:
            assert callable(_resolve(name))
        except (ImportError, AttributeError, AssertionError):
            missing.append(name)
    assert not missing, f"stage entries in docs/architecture.md that do not exist: {missing}"


# a module named relative to its package folder (`stacks/loader.py:load_stack`)
SHORT_PATH = re.compile(r"`([a-z_]+/[\w/]*\w\.py)")


def test_every_path_the_doc_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = set(REPO_PATH.findall(text))
    assert len(paths) > 40
    missing = sorted(p for p in paths if not (REPO / p).exists())
    short = set(SHORT_PATH.findall(text)) - paths
    assert len(short) > 10
    missing += sorted(
        p for p in short if not any((REPO / root / p).exists() for root in ("", "pipeline"))
    )
    assert not missing, f"paths in docs/architecture.md that do not exist: {missing}"
