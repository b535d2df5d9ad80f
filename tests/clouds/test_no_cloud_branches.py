"""Per-cloud facts live in the cloud's folder and spec: outside
``pipeline/clouds/<cloud>/`` and the registry no code

- compares a value with a cloud's name (``cloud == "aws"``, ``cloud in ("aws", "gcp")``,
  ``case "aws":``),
- keys a table by cloud names (``{"aws": ..., "azure": ...}.get(cloud)``),
- binds a tuple, list or set of cloud names to a variable (``REMOTE = ("aws", "gcp")``,
  ``frozenset({"aws", "gcp"})``): a second registry of clouds,
- or does any of that with a Packer builder name (``builder == "amazon-ebs"``): the
  builder is the cloud's (``CloudSpec.packer_builder``, ``spec_for_builder``).

It asks ``cloud_spec(cloud)`` instead."""

from __future__ import annotations

import ast
from pathlib import Path

from imagectl.clouds.registry import BUILTIN, specs
from tests.support import ROOT

CLOUDS = tuple(BUILTIN)
BUILDERS = tuple(spec.packer_builder for spec in specs().values())
REGISTRY = ROOT / "pipeline" / "clouds" / "registry.py"  # the one table of the clouds' names

OWN = [ROOT / "pipeline" / "clouds" / name for name in CLOUDS]


def _names(node: ast.AST, names: tuple[str, ...]) -> list[str]:
    if isinstance(node, ast.Constant) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names(e, names)]
    if (  # frozenset({...}), tuple([...]): the collection inside
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("frozenset", "set", "tuple", "list")
        and len(node.args) == 1
    ):
        return _names(node.args[0], names)
    return []


def cloud_branches(source: str) -> list[tuple[int, str]]:
    """(line, what) for every comparison with a cloud or builder name, every table keyed
    by two or more of them, and every collection of two or more bound to a variable."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for names, kind in ((CLOUDS, "cloud"), (BUILDERS, "builder")):
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    for name in _names(side, names):
                        found.append((node.lineno, f"compares with {kind} {name!r}"))
            elif isinstance(node, ast.MatchValue):
                for name in _names(node.value, names):
                    found.append((node.lineno, f"matches {kind} {name!r}"))
            elif isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                if len(set(keys) & set(names)) >= 2:
                    found.append((node.lineno, f"a table keyed by {kind}s {sorted(keys)}"))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                bound = set(_names(node.value, names))
                if isinstance(node.value, ast.Constant) or len(bound) < 2:
                    continue
                found.append((node.lineno, f"binds the {kind}s {sorted(bound)} to a variable"))
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


def test_no_cloud_name_branches_in_the_validator() -> None:
    """The validator names no cloud either: what it knows of each (metadata, credential
    files, image identity grammar) is validators/data/clouds.yaml."""
    paths = sorted((ROOT / "validators").rglob("*.py"))
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in paths
        for line, what in cloud_branches(path.read_text())
    ]
    assert len(paths) > 50
    assert not offenders, "put it in validators/data/clouds.yaml:\n" + "\n".join(offenders)


def test_the_check_finds_the_branches_it_forbids() -> None:
    source = (
        'if cloud == "aws":\n    pass\n'  # 1
        'ok = cloud in ("gcp", "azure")\n'  # 3: a comparison (the tuple is not bound)
        'zone = {"aws": 1, "gcp": 2}.get(cloud)\n'  # 4
        'REMOTE = ("aws", "gcp")\n'  # 5
        'KEPT: list[str] = ["gcp", "azure", "aws"]\n'  # 6
        'ALL = frozenset({"aws", "azure"})\n'  # 7
        'if builder == "amazon-ebs":\n    pass\n'  # 8
        'ok = entry["builder_type"] in ("googlecompute", "azure-arm")\n'  # 10
        'match cloud:\n    case "azure":\n        pass\n'  # 12
        'name = "local"\n'  # a value, not a branch: allowed
        'argv = ["aws", "ssm", "get-parameter"]\n'  # one cloud name in a command line: allowed
    )
    lines = sorted(line for line, _ in cloud_branches(source))
    assert lines == [1, 3, 3, 4, 5, 6, 7, 8, 10, 10, 12]
    kinds = {what.split(" ")[0] for _, what in cloud_branches(source)}
    assert kinds == {"compares", "a", "binds", "matches"}


def test_every_cloud_has_a_spec_a_template_folder_and_a_provider_module() -> None:
    assert tuple(specs()) == CLOUDS
    for name, spec in specs().items():
        assert (ROOT / "images" / name / "candidate.pkr.hcl").is_file()
        module = ROOT / "pipeline" / Path(*spec.provider_module.split(".")[1:])
        assert module.with_suffix(".py").is_file(), spec.provider_module
