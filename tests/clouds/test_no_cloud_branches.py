"""Per-cloud facts live in the cloud's spec (issue 18, item 3): outside
``pipeline/clouds/<cloud>/`` no code compares a value with a cloud's name
(``cloud == "aws"``, ``cloud in ("aws", "gcp")``) or keys a table by cloud names
(``{"aws": ..., "azure": ...}.get(cloud)``); it asks ``cloud_spec(cloud)`` instead."""

from __future__ import annotations

import ast
from pathlib import Path

from imagectl.clouds.registry import BUILTIN, specs
from tests.support import ROOT

CLOUDS = tuple(BUILTIN)
REGISTRY = ROOT / "pipeline" / "clouds" / "registry.py"  # the one table of the clouds' names

OWN = [ROOT / "pipeline" / "clouds" / name for name in CLOUDS]


def _names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and node.value in CLOUDS:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names(e)]
    return []


def cloud_branches(source: str) -> list[tuple[int, str]]:
    """(line, what) for every comparison with a cloud name and every table keyed by
    two or more cloud names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                for name in _names(side):
                    found.append((node.lineno, f"compares with {name!r}"))
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if len(set(keys) & set(CLOUDS)) >= 2:
                found.append((node.lineno, f"a table keyed by clouds {sorted(keys)}"))
    return found


def test_no_cloud_name_branches_outside_the_clouds_own_folders() -> None:
    offenders = []
    checked = 0
    for path in (ROOT / "pipeline").rglob("*.py"):
        if any(path.is_relative_to(own) for own in OWN) or path == REGISTRY:
            continue
        checked += 1
        rel = path.relative_to(ROOT)
        offenders += [f"{rel}:{line}: {what}" for line, what in cloud_branches(path.read_text())]
    assert checked > 100
    assert not offenders, "ask cloud_spec(cloud) instead:\n" + "\n".join(offenders)


def test_the_check_finds_the_branches_it_forbids() -> None:
    source = (
        'if cloud == "aws":\n    pass\n'
        'ok = cloud in ("gcp", "azure")\n'
        'zone = {"aws": 1, "gcp": 2}.get(cloud)\n'
        'name = "local"\n'  # a value, not a branch: allowed
    )
    assert [line for line, _ in cloud_branches(source)] == [1, 3, 3, 4]


def test_every_cloud_has_a_spec_a_template_folder_and_a_provider_module() -> None:
    assert tuple(specs()) == CLOUDS
    for name, spec in specs().items():
        assert (ROOT / "images" / name / "candidate.pkr.hcl").is_file()
        module = ROOT / "pipeline" / Path(*spec.provider_module.split(".")[1:])
        assert module.with_suffix(".py").is_file(), spec.provider_module
