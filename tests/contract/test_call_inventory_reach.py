"""No call site the code reaches is marked unreachable in the inventory.

``images/permissions/calls/<cloud>.yaml`` may mark a site ``path: unreachable`` (no
roles: no document grants its permissions). That claim is checked here against the code:
a static reach over every function of ``pipeline/`` by name. Roots are what runs without
being called by name in our code: module-level statements, functions a decorator
registers (click commands; not ``abstractmethod``, ``property`` and the like), dunder
methods, and any function referenced
without a call (a callback handed over: ``checks=(location_findings,)``). A function is
reached when a reached function calls or references its name. Names are matched by
themselves (a method ``get`` is reached by any ``.get(``): the reach errs towards
"reached", so a site it calls unreached has no caller at all. AzureProvider._list_raw was
marked unreachable though latest's get and set and the canary call it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.contract import call_inventory as inv

ROOT = Path(__file__).resolve().parents[2]
# decorators that leave a function called by its name (not registered with a framework)
PLAIN = {"abstractmethod", "property", "staticmethod", "classmethod", "cache", "lru_cache",
         "cached_property", "overload", "override", "contextmanager", "setter"}  # fmt: skip


def _decorator(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _graph() -> tuple[dict[str, set[str]], set[str]]:
    """function name -> names it calls or references; the roots."""
    uses: dict[str, set[str]] = {}
    roots: set[str] = set()

    def names_in(node: ast.AST) -> set[str]:
        out = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                out.add(sub.attr)
            elif isinstance(sub, ast.Name):
                out.add(sub.id)
        return out

    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        tree = ast.parse(path.read_text())

        def visit(body: list[ast.stmt]) -> None:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found = set()
                    for part in [*node.body, *node.args.defaults, *node.args.kw_defaults]:
                        if part is not None:
                            found |= names_in(part)
                    uses.setdefault(node.name, set()).update(found)
                    framework = {_decorator(d) for d in node.decorator_list} - PLAIN
                    if framework or node.name.startswith("__"):
                        roots.add(node.name)
                elif isinstance(node, ast.ClassDef):
                    for base in [*node.bases, *node.keywords, *node.decorator_list]:
                        roots.update(names_in(base))
                    visit(node.body)
                else:
                    roots.update(names_in(node))  # module level and class attributes

        visit(tree.body)
    return uses, roots


@functools.cache
def reached() -> frozenset[str]:
    uses, roots = _graph()
    seen: set[str] = set()
    todo = [r for r in roots if r in uses]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [n for n in uses.get(name, ()) if n in uses and n not in seen]
    return frozenset(seen)


def test_the_reach_sees_paths_through_the_commands() -> None:
    live = reached()
    # the canary's cloud calls, through set_canary from the promote command
    assert {"set_canary", "get_canary_pointer", "_eligible", "_list_raw"} <= live
    assert "find_images" not in live  # no command calls it (Provider.find_images)


@pytest.mark.parametrize("cloud", inv.CLOUDS)
def test_no_reached_site_is_marked_unreachable(cloud: str) -> None:
    live = reached()
    wrong = [
        f"{e.at} ({e.call})"
        for e in inv.inventory(cloud)[0]
        if e.path == "unreachable" and e.at.rsplit(".", 1)[-1].rsplit(":", 1)[-1] in live
    ]
    assert wrong == [], (
        f"images/permissions/calls/{cloud}.yaml marks sites unreachable that the code "
        f"reaches; give them the roles whose commands reach them: {wrong}"
    )
