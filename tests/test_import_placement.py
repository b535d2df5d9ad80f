"""Imports live at module level; a function-level import is allowed only where the
architecture says so (docs/architecture.md, "Imports"):

- in the command line (``pipeline/cli/``, and the validator's host-side commands in
  ``validators/commands/``): the registry imports a command's module only when it runs,
  and a command imports the stage it calls inside its body, so that
  ``imagectl --help`` and ``imagectl COMMAND --help`` load no SDK, database or NVML
  (``tests/cli/test_startup.py`` holds them to it);
- for a heavy SDK that only some paths need (each listed below with why): the cloud SDKs,
  torch, the KMS signers, ansible-runner, jsonschema (the SBOM check) and
  Alembic (a catalog's migrations).

Everything else imports at the top, where a reader (and the import-cycle test) sees it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("pipeline", "validators")

# the controller's commands and the validator's host-side ones (imagectl.validators.commands)
CLI = ("pipeline/cli/", "validators/commands/")

# top-level package -> why it may be imported inside the function that needs it
LAZY_SDKS = {
    "boto3": "AWS SDK: only the AWS provider and signer load it",
    "botocore": "AWS SDK (exceptions, config): with boto3",
    "google": "Google Cloud SDK: only the GCP provider and signer load it",
    "azure": "Azure SDK: only the Azure provider and signer load it",
    "moto": "the AWS emulator: only its sandbox server",
    "torch": "PyTorch: only the CUDA and collective smoke tests (seconds to import)",
    "securesystemslib": "its signers import every installed cloud KMS SDK",
    "cryptography": "key files for the signers, with securesystemslib",
    "ansible_runner": "only the cloud validation fan-out",
    "jsonschema": "only the SBOM check: its import compiles rfc3987-syntax's lark grammar "
    "(1-4 s that every `imagectl build` paid at start)",
    "referencing": "jsonschema's schema registry, with jsonschema",
    "cyclonedx": "the CycloneDX schema files, with jsonschema",
    "rich": "the console loads when a command prints (imagectl.core.output): ~40 ms that "
    "imagectl --help and every COMMAND --help would pay",
    "alembic": "only a catalog that is not at the newest schema (a new one, or after an "
    "upgrade) migrates; importing it and loading its scripts were ~0.4 s of CPU in every "
    "process that opened the catalog",
}


def function_level_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import inside a function body, ``if TYPE_CHECKING`` aside."""
    found: list[tuple[int, str]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", "") == "TYPE_CHECKING":
                continue
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, a.name) for a in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                found.append((child.lineno, "." * child.level + (child.module or "")))
            walk(child, inside)

    walk(ast.parse(source), False)
    return found


# file -> why it may import its own package's modules inside a function
LAZY_OWN = {
    "pipeline/clouds/registry.py": "the CLI reads the cloud names for --cloud's choices at "
    "--help; a spec (CloudSpec pulls in the stack schema and pydantic, ~0.14 s) and the "
    "validator's shape table load only when a cloud's spec is first asked for",
}


def allowed(path: str, module: str) -> bool:
    return path.startswith(CLI) or module.split(".")[0] in LAZY_SDKS or path in LAZY_OWN


def test_function_level_imports_only_where_allowed() -> None:
    offenders = []
    seen = 0
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for line, module in function_level_imports(path.read_text(encoding="utf-8")):
                seen += 1
                if not allowed(rel, module):
                    offenders.append(f"{rel}:{line} imports {module}")
    assert seen > 20  # the SDK loaders were really read
    assert not offenders, (
        "function-level imports outside the command line and the SDK loaders (move "
        "them to the top of the module; break a cycle with a third module):\n"
        + "\n".join(offenders)
    )


def test_the_scan_finds_a_hidden_import_and_spares_the_allowed_ones() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from imagectl.catalog import Catalog\n"
        "def f():\n    from imagectl.catalog.db import open_catalog\n"
        "    def g():\n        import boto3\n"
        "class C:\n    def m(self):\n        import imagectl.stacks as s\n"
    )
    found = function_level_imports(source)
    assert found == [(5, "imagectl.catalog.db"), (7, "boto3"), (10, "imagectl.stacks")]
    assert [m for _, m in found if not allowed("pipeline/x.py", m)] == [
        "imagectl.catalog.db",
        "imagectl.stacks",
    ]
    assert allowed("pipeline/cli/common.py", "imagectl.catalog.db")
    assert allowed("pipeline/clouds/registry.py", "imagectl.clouds.spec")
    assert not allowed("pipeline/clouds/reap.py", "imagectl.clouds.spec")
