"""A cloud is its folder: outside ``pipeline/clouds/`` (whose ``registry.py``
holds the one list of the clouds' names) no code names a cloud. Every string constant
equal to a registered cloud's name (docstrings aside) and every stack section read by
attribute (``stack.clouds.aws``) in pipeline/ is enumerated; code asks the registry
(``cloud_spec(name)``), a spec (``SPEC.name``) or the stack (``clouds.section(name)``,
``clouds.section_of(AwsCloud)``) instead. Data files (YAML) may name clouds.

The few constants that spell a cloud's name but mean something else are listed in
``NOT_A_CLOUD`` with what they mean, counted per file, so a new one still fails."""

from __future__ import annotations

import ast
from collections import Counter

from imagectl.clouds.registry import BUILTIN
from tests.support import ROOT

PIPELINE = ROOT / "pipeline"
CLOUDS_FOLDER = PIPELINE / "clouds"
NAMES = frozenset(BUILTIN)

# (file, name) -> (how many, what it means there)
NOT_A_CLOUD: dict[tuple[str, str], tuple[int, str]] = {
    ("pipeline/validation/inventory.py", "local"): (1, "Ansible's connection plugin 'local'"),
    ("pipeline/validation/fabric/measure.py", "local"): (1, "Ansible's connection plugin 'local'"),
    ("pipeline/cli/run.py", "local"): (1, "the default stack: images/stacks/local.yaml"),
    ("pipeline/orchestrate/run.py", "local"): (1, "the default stack: images/stacks/local.yaml"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            assert isinstance(body, list)
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def cloud_names_in(source: str, names: frozenset[str] = NAMES) -> list[tuple[int, str]]:
    """(line, name) for every string constant that is a cloud's name (not a docstring)
    and (line, ".name") for every ``<...>.clouds.<name>`` attribute read."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs:
            found.append((node.lineno, str(node.value)))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in names
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "clouds"
        ):
            found.append((node.lineno, f".{node.attr}"))
    return sorted(found)


def test_no_cloud_is_named_in_code_outside_the_clouds_folder() -> None:
    counts: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], list[int]] = {}
    checked = 0
    for path in sorted(PIPELINE.rglob("*.py")):
        if path.is_relative_to(CLOUDS_FOLDER):
            continue
        checked += 1
        rel = path.relative_to(ROOT).as_posix()
        for line, name in cloud_names_in(path.read_text(encoding="utf-8")):
            counts[(rel, name)] += 1
            where.setdefault((rel, name), []).append(line)
    assert checked > 150
    offenders = [
        f"{rel}:{','.join(map(str, where[(rel, name)]))}: {name!r}"
        for (rel, name), n in sorted(counts.items())
        if n > NOT_A_CLOUD.get((rel, name), (0, ""))[0]
    ]
    assert not offenders, (
        "a cloud's name in code outside pipeline/clouds/; ask the registry, the cloud's "
        "spec or the stack (clouds.section / section_of) instead:\n" + "\n".join(offenders)
    )
    stale = [k for k, (n, _) in NOT_A_CLOUD.items() if counts[k] < n]
    assert not stale, f"NOT_A_CLOUD lists more than the code has: {stale}"


def test_the_scan_finds_what_it_forbids() -> None:
    source = (
        '"""A docstring may say aws."""\n'
        'if cloud == "aws":\n'
        "    pass\n"
        'clouds = ("gcp", "azure")\n'
        "kernel = stack.clouds.local.kernel\n"
        "x = built.local\n"  # not a stack section: allowed
        'label = "locally"\n'
    )
    assert cloud_names_in(source) == [(2, "aws"), (4, "azure"), (4, "gcp"), (5, ".local")]
