"""No import cycles between imagectl's packages (issue: one source of truth).

The graph is read from the source with ``ast``: every ``import imagectl.x`` and
``from imagectl.x import ...``, at module level and inside functions alike (an import
moved into a function hides a cycle from Python, not from this test). A package is the
first name under ``imagectl`` (``imagectl.stacks``, ``imagectl.packer``...; the validator
is ``imagectl.validators``; a single-file module is its own node)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = {"pipeline": "imagectl", "validators": "imagectl.validators"}


def _node(module: str) -> str:
    parts = module.split(".")
    if parts[:2] == ["imagectl", "validators"]:
        return "validators"
    return parts[1] if len(parts) > 1 else "imagectl"


def import_graph(files: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """(package, package) -> where: the imports between different packages, from
    ``{module name: source}``."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, source in files.items():
        here = _node(module)
        for n in ast.walk(ast.parse(source)):
            targets: list[str] = []
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("imagectl."):
                targets = [n.module]
            elif isinstance(n, ast.Import):
                targets = [a.name for a in n.names if a.name.startswith("imagectl.")]
            for target in targets:
                there = _node(target)
                if there != here:
                    edges[(here, there)].append(f"{module}:{n.lineno}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _sources() -> dict[str, str]:
    out = {}
    for folder, prefix in SOURCES.items():
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder).with_suffix("")
            name = ".".join([prefix, *rel.parts]).removesuffix(".__init__")
            out[name] = path.read_text(encoding="utf-8")
    return out


def test_no_import_cycles_between_packages() -> None:
    edges = import_graph(_sources())
    assert len(edges) > 30  # the graph was really read
    found = cycles(edges)
    detail = [
        f"{a} -> {b}: {', '.join(edges[(a, b)][:3])}"
        for comp in found
        for a in comp
        for b in comp
        if (a, b) in edges
    ]
    assert not found, "import cycles between packages:\n" + "\n".join(detail)


def test_a_function_level_import_cycle_is_found() -> None:
    files = {
        "imagectl.stacks.plan": "from imagectl.packer.build import x\n",
        "imagectl.packer.build": "def f():\n    from imagectl.stacks.plan import y\n",
        "imagectl.catalog.db": "import imagectl.core.errors\n",
    }
    assert cycles(import_graph(files)) == [["packer", "stacks"]]


def _registered(module: str, tree: ast.Module) -> list[str]:
    """Modules a registry package loads by name: a module-level ``MODULES`` tuple of
    submodule names passed to ``importlib.import_module`` (``validators/checks``)."""
    calls = any(isinstance(n, ast.Attribute) and n.attr == "import_module" for n in ast.walk(tree))
    for n in tree.body:
        if (
            calls
            and isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "MODULES" for t in n.targets)
            and isinstance(n.value, ast.Tuple)
        ):
            return [
                f"{module}.{e.value}"
                for e in n.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
    return []


def _with_parents(target: str, module: str) -> list[str]:
    """Importing ``a.b.c`` runs ``a.b``'s ``__init__`` first, unless the importer is already
    inside ``a.b`` (its package ran before it)."""
    parts = target.split(".")
    parents = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in parents if not module.startswith(p + ".")] + [target]


def module_graph(files: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """(module, module) -> where, for imports between imagectl modules (a package's
    ``__init__`` counts as the package's module, and runs whenever one of its modules is
    imported from outside it)."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, source in files.items():
        tree = ast.parse(source)
        for target in _registered(module, tree):
            edges[(module, target)].append(f"{module}:MODULES")
        for n in ast.walk(tree):
            targets: list[str] = []
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("imagectl"):
                targets = [n.module, *(f"{n.module}.{a.name}" for a in n.names)]
            elif isinstance(n, ast.Import):
                targets = [a.name for a in n.names if a.name.startswith("imagectl")]
            for target in {t for named in targets for t in _with_parents(named, module)}:
                # importing a module runs its parent packages' __init__, never the reverse
                if target in files and target != module and not module.startswith(target + "."):
                    edges[(module, target)].append(f"{module}:{n.lineno}")
    return edges


def test_no_import_cycles_between_modules() -> None:
    """Inside a package too (compat.engine and checks, promotion.promote and retention,
    validation.run and inventory were such pairs): a type or helper both sides need
    lives in a third module."""
    edges = module_graph(_sources())
    found = cycles(edges)
    detail = [f"{a} -> {b}" for comp in found for a in comp for b in comp if (a, b) in edges]
    assert not found, "import cycles between modules:\n" + "\n".join(detail)


def test_a_module_cycle_inside_a_package_is_found() -> None:
    files = {
        "imagectl.compat.engine": "def f():\n    from imagectl.compat.checks import E\n",
        "imagectl.compat.checks": "from imagectl.compat.engine import Combination\n",
        "imagectl.compat": "",
    }
    assert cycles(module_graph(files)) == [["imagectl.compat.checks", "imagectl.compat.engine"]]


# What each side may import of imagectl besides itself (one core under
# both sides). The validator, installed alone on a fleet node, imports the core and two
# modules that hold no code: the root package (its __version__; Python runs it before any
# imagectl.validators module anyway) and imagectl.images (the data folder shipped as a
# package; the validator reads its catalogs). The core imports nothing of imagectl.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "imagectl.validators": ("imagectl.core", "imagectl", "imagectl.images"),
    "imagectl.core": (),
}
# the modules above that the validator may import although they are not the core: they
# must stay code-free (test_the_allowed_data_modules_hold_no_code)
DATA_MODULES = {"imagectl": "pipeline/__init__.py", "imagectl.images": "images/__init__.py"}


def _imports(source: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out.append((n.lineno, n.module))
        elif isinstance(n, ast.Import):
            out.extend((n.lineno, a.name) for a in n.names)
    return out


def _allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """``imagectl.core`` admits its modules; ``imagectl`` and ``imagectl.images`` only
    themselves (``from imagectl import __version__``)."""
    return any(
        name == a or (a == "imagectl.core" and name.startswith("imagectl.core.")) for a in allowed
    )


def boundary_violations(files: dict[str, str]) -> list[str]:
    """Every import of imagectl that crosses a side's boundary (``MAY_IMPORT``), at module
    level or inside a function, from ``{module name: source}``."""
    found: list[str] = []
    for module, source in files.items():
        for side, allowed in MAY_IMPORT.items():
            if module != side and not module.startswith(side + "."):
                continue
            for line, name in _imports(source):
                own = name == side or name.startswith(side + ".")
                if name.split(".")[0] == "imagectl" and not own and not _allowed(name, allowed):
                    found.append(f"{module}:{line} imports {name}")
    return sorted(found)


def test_the_validator_imports_only_the_core_and_itself() -> None:
    files = _sources()
    assert sum(m.startswith("imagectl.validators.") for m in files) > 50  # really read
    found = [v for v in boundary_violations(files) if v.startswith("imagectl.validators")]
    assert not found, "the validator imports controller code:\n" + "\n".join(found)


def test_the_core_imports_nothing_of_imagectl() -> None:
    files = _sources()
    assert "imagectl.core.errors" in files
    found = [v for v in boundary_violations(files) if v.startswith("imagectl.core")]
    assert not found, "imagectl.core imports the rest of imagectl:\n" + "\n".join(found)


def test_the_allowed_data_modules_hold_no_code() -> None:
    """The root package and imagectl.images are allowed to the validator because they
    hold nothing but a version string and data: no import, no function, no class."""
    for name, path in DATA_MODULES.items():
        tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
        code = [
            n for n in tree.body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            and not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant))
        ]  # fmt: skip
        assert not code, f"{name} ({path}) holds code: line {code[0].lineno}"


def test_a_forbidden_import_is_found() -> None:
    """The scan finds a controller import in the validator (top level or in a function,
    ``import`` or ``from``) and any imagectl import in the core, and admits the core,
    the root's version and the data package."""
    files = {
        "imagectl.validators.session": "from imagectl import __version__\n"
        "from imagectl.core.errors import UserError\nimport imagectl.images\n"
        "from imagectl.validators.results import Action\n",
        "imagectl.validators.commands.validate": "def f():\n"
        "    from imagectl.stacks.expectations import from_stack\n",
        "imagectl.validators.report": "import imagectl.cli.common\n",
        "imagectl.validators.cheat": "from imagectl.images.x import y\n",
        "imagectl.core.fsutil": "import json\nfrom imagectl.core.errors import UserError\n",
        "imagectl.core.output": "from imagectl.validators.results import Action\n",
        "imagectl.stacks.expectations": "from imagectl.validators.expectations import E\n",
    }
    assert boundary_violations(files) == [
        "imagectl.core.output:1 imports imagectl.validators.results",
        "imagectl.validators.cheat:1 imports imagectl.images.x",
        "imagectl.validators.commands.validate:2 imports imagectl.stacks.expectations",
        "imagectl.validators.report:1 imports imagectl.cli.common",
    ]


def test_a_cycle_through_a_registry_package_is_found() -> None:
    """nvml.unsupported imported checks.base, whose package loads every check by name,
    one of which imported nvml.unsupported: importing it first failed."""
    files = {
        "imagectl.validators.checks": (
            "import importlib\nMODULES = ('inventory',)\n"
            "for m in MODULES:\n    importlib.import_module(f'{__name__}.{m}')\n"
        ),
        "imagectl.validators.checks.base": "",
        "imagectl.validators.checks.inventory": (
            "from imagectl.validators.nvml.unsupported import peers\n"
        ),
        "imagectl.validators.nvml.unsupported": (
            "from imagectl.validators.checks.base import bad\n"
        ),
    }
    (found,) = cycles(module_graph(files))
    assert "imagectl.validators.nvml.unsupported" in found
    assert "imagectl.validators.checks" in found
