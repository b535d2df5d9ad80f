"""Concurrency that never drops an operator's run.

GitHub's rule (GitHub Docs, "Control the concurrency of workflows and jobs"): in one
concurrency group at most one run is in progress and one pending; "any existing pending
job or workflow in the same concurrency group, if it exists, will be canceled and the new
queued job or workflow will take its place", and `cancel-in-progress: true` cancels the
running one too. So a manual promote or rollback must share its group with no other run
(not even another manual one): it has no group, and the catalog's promotion lock
(`--wait`) serialises it with the other pointer moves. The scheduled rollout has a group
of its own and lets a queued, waiting or running manual run of the same stack and cloud
go first (its check is run here against a stand-in `gh` answering as `gh run list` does).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.workflows.test_workflow_commands import split_commands

REPO = Path(__file__).resolve().parents[2]
FLOWS = REPO / ".github" / "workflows"
EXPR = re.compile(r"\$\{\{.*?\}\}", re.S)
MANUAL = ("promote.yml", "rollback.yml")
CLOUDS = ("aws", "gcp", "azure")
POINTER_COMMANDS = {"promote", "rollback", "rollout", "block", "revoke", "deprecate"}


def _load(name: str) -> Any:
    return YAML(typ="safe").load((FLOWS / name).read_text())


def _triggers(doc: Any) -> set[str]:
    on = doc.get("on", doc.get(True))
    return set(on) if isinstance(on, (dict, list)) else {on}


CLOUD_EXPR = re.compile(r"^(inputs|matrix(\.target)?)\.cloud$")


def groups() -> list[tuple[str, str, str | None, bool]]:
    """(workflow, job, group pattern or None, cancel-in-progress) of every job (a group
    per cloud: a cloud expression takes aws, gcp or azure); a group's other expressions
    become `*` (they may take any value), `github.run_id` excepted (one run's own)."""
    out: list[tuple[str, str, str | None, bool]] = []
    for path in sorted(FLOWS.glob("*.yml")):
        doc = _load(path.name)
        for name, job in doc["jobs"].items():
            conc = job.get("concurrency", doc.get("concurrency"))
            if conc is None:
                out.append((path.name, name, None, False))
                continue
            if isinstance(conc, str):
                conc = {"group": conc}
            group, cancel = str(conc["group"]), conc.get("cancel-in-progress") is True
            if "github.run_id" in group:
                out.append((path.name, name, None, cancel))
                continue
            clouds = (
                ["aws", "gcp", "azure"]
                if any(CLOUD_EXPR.match(e.strip("${} ")) for e in EXPR.findall(group))
                else [""]
            )
            for cloud in clouds:

                def value(m: re.Match[str], cloud: str = cloud) -> str:
                    return cloud if CLOUD_EXPR.match(m.group(0).strip("${} ")) else "*"

                out.append((path.name, name, EXPR.sub(value, group), cancel))
    return out


def _may_meet(a: str, b: str) -> bool:
    """Whether two group patterns can be the same string (`*`: any text, none too)."""
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*":
            todo += [(i + 1, j)] + ([(i, j + 1)] if j < len(b) else [])
        if j < len(b) and b[j] == "*":
            todo += [(i, j + 1)] + ([(i + 1, j)] if i < len(a) else [])
        if i < len(a) and j < len(b) and a[i] == b[j] != "*":
            todo.append((i + 1, j + 1))
    return False


def _moves_pointers(flow: str, job: str) -> bool:
    body = _load(flow)["jobs"][job]
    scripts = [str(s.get("run", "")) for s in body.get("steps") or []]
    return any(w and w[0] in POINTER_COMMANDS and "--dry-run" not in w
               for script in scripts for w in split_commands(script))  # fmt: skip


def test_groups_are_enumerated() -> None:
    found: dict[tuple[str, str], set[str | None]] = {}
    for f, j, g, _c in groups():
        found.setdefault((f, j), set()).add(g)
    assert found[("rollout.yml", "act")] == {f"imagectl-*-{c}-rollout" for c in CLOUDS}
    assert found[("cloud-build.yml", "promote")] == {
        f"imagectl-*-{c}-build-promote" for c in CLOUDS
    }
    assert found[("promote.yml", "promote")] == found[("rollback.yml", "rollback")] == {None}
    # the old layout: the rollout's and the manual runs' groups were one
    assert _may_meet("imagectl-*-aws-promote", "imagectl-*-aws-promote")
    assert not _may_meet("imagectl-*-aws-rollout", "imagectl-*-aws-promote")
    assert _may_meet("imagectl-*", "imagectl-*-aws-promote")  # `*` may hold the suffix
    assert not _may_meet("imagectl-*-aws", "imagectl-*-aws-build-promote")
    assert not _may_meet("imagectl-*-gcp-rollout", "imagectl-*-aws-rollout")


def test_a_manual_run_shares_its_group_with_no_run() -> None:
    for flow, job, group, _cancel in groups():
        if flow in MANUAL:
            assert group is None, f"{flow} / {job} is in group {group}: a run joining it " \
                                  "would cancel the operator's pending run"  # fmt: skip
    assert {f for f, j, _g, _c in groups() if _moves_pointers(f, j)} >= set(MANUAL)


def test_no_pointer_mover_cancels_another() -> None:
    movers = [(f, j, g, c) for f, j, g, c in groups() if _moves_pointers(f, j)]
    assert {(f, j) for f, j, _g, _c in movers} >= {("rollout.yml", "act"),
                                                   ("cloud-build.yml", "promote")}  # fmt: skip
    for flow, job, group, cancel in movers:
        assert not cancel, f"{flow} / {job}: cancel-in-progress stops a running pointer move"
        if group is None:
            continue
        # a scheduled or build run may only meet runs of its own job
        for other_flow, other_job, other, _c in groups():
            if other is not None and (other_flow, other_job) != (flow, job):
                assert not _may_meet(group, other), (flow, job, other_flow, other_job, other)


def test_serialised_by_the_promotion_lock_instead() -> None:
    """Without a shared group, each pointer move of a manual or build run waits for the
    one that holds the stack's promotion lock (`--wait` seconds) rather than failing."""
    for flow, job in [(f, "promote") for f in ("promote.yml", "cloud-build.yml")] + [
        ("rollback.yml", "rollback")
    ]:
        body = _load(flow)["jobs"][job]
        step_env: dict[str, str] = {}
        commands = []
        for step in body["steps"]:
            step_env.update({k: str(v) for k, v in (step.get("env") or {}).items()})
            commands += [w for w in split_commands(str(step.get("run", ""))) if w]
        moving = [w for w in commands if w[0] in POINTER_COMMANDS]
        assert moving, (flow, job)
        for words in moving:
            assert "--wait" in words, (flow, words)
            value = words[words.index("--wait") + 1]
            seconds = float(step_env.get(value.strip("$").strip('"'), value))
            assert seconds >= 3600, (flow, words, seconds)


def _run_name(flow: str, **inputs: object) -> str:
    template = str(_load(flow)["run-name"])

    def value(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr == "inputs.canary && ': canary' || ''":
            return ": canary" if inputs.get("canary") else ""
        assert expr.startswith("inputs."), expr
        return str(inputs[expr.removeprefix("inputs.")])

    return re.sub(r"\$\{\{(.*?)\}\}", value, template)


def _check(tmp_path: Path, runs: dict[str, list[dict[str, str]]]) -> tuple[str, str]:
    """Run the act job's check with a `gh` that answers `gh run list --workflow W --json
    status,displayTitle` with ``runs[W]``; returns (skip, the check's output)."""
    step = next(s for s in _load("rollout.yml")["jobs"]["act"]["steps"]
                if s.get("id") == "manual")  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for flow, listed in runs.items():
        (tmp_path / f"{flow}.json").write_text(json.dumps(listed))
    gh = bin_dir / "gh"
    gh.write_text(
        "#!/bin/bash\n"
        '[ "$1 $2" = "run list" ] || exit 64\n'
        'while [ $# -gt 0 ]; do [ "$1" = --workflow ] && flow=$2; shift; done\n'
        f'cat "{tmp_path}/$flow.json" 2>/dev/null || echo "[]"\n'
    )
    gh.chmod(0o755)
    out_file = tmp_path / "out"
    out_file.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GH_TOKEN": "t",
           "REPO": "o/r", "STACK": "h100-training", "CLOUD": "aws",
           "GITHUB_OUTPUT": str(out_file)}  # fmt: skip
    done = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    skip = dict(line.split("=", 1) for line in out_file.read_text().splitlines())["skip"]
    return skip, done.stdout


@pytest.mark.parametrize(
    ("flow", "title_inputs", "status", "skip"),
    [
        ("rollback.yml", {"canary": False}, "waiting", "true"),  # its reviewers not yet
        ("rollback.yml", {"canary": True}, "queued", "true"),
        ("promote.yml", {"image": "ami-0123456789abcdef0"}, "in_progress", "true"),
        ("promote.yml", {"image": "ami-0123456789abcdef0"}, "completed", "false"),
    ],
)
def test_the_rollout_lets_a_manual_run_go_first(
    tmp_path: Path, flow: str, title_inputs: dict[str, object], status: str, skip: str
) -> None:
    title = _run_name(flow, stack="h100-training", cloud="aws", **title_inputs)
    other = _run_name(flow, stack="h100-training-b", cloud="aws", **title_inputs)
    runs = {flow: [{"status": status, "displayTitle": title},
                                        {"status": "queued", "displayTitle": other}]}  # fmt: skip
    got, out = _check(tmp_path, runs)
    assert got == skip, (title, out)
    if skip == "true":
        assert "::notice title=rollout skipped::" in out


def test_the_act_job_checks_before_it_signs_in() -> None:
    steps = _load("rollout.yml")["jobs"]["act"]["steps"]
    assert steps[0].get("id") == "manual"
    for step in steps[1:]:
        assert "steps.manual.outputs.skip == 'false'" in str(step.get("if", "")), step
    perms = _load("rollout.yml")["jobs"]["act"]["permissions"]
    assert perms["actions"] == "read"
