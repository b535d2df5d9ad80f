"""The build workflow as a real repository runs it: each cloud's build and promotion
stand alone (a reusable workflow called once per cloud, so one cloud's failure skips no
other's promotion), each signs with its own cloud's key, `imagectl doctor` runs before
anything is built, validation admits SSH from the runner's public address, and the
promote job promotes exactly the image id its build job validated (an artifact between
the two jobs), never "the newest validated image of the stack"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.workflows.test_workflow_commands import split_commands

REPO = Path(__file__).resolve().parents[2]
FLOWS = REPO / ".github" / "workflows"
CLOUDS = ("aws", "gcp", "azure")


def load(name: str) -> Any:
    return YAML(typ="safe").load((FLOWS / name).read_text())


def _commands(job: dict[str, Any]) -> list[list[str]]:
    return [words for step in job["steps"] if "run" in step
            for words in split_commands(str(step["run"]))]  # fmt: skip


def test_each_cloud_is_its_own_call_needing_nothing_of_another() -> None:
    jobs = load("build.yml")["jobs"]
    for cloud in CLOUDS:
        job = jobs[cloud]
        assert job["uses"] == "./.github/workflows/cloud-build.yml"
        assert job["needs"] == "changes"  # never another cloud's job
        assert job["with"]["cloud"] == cloud
        assert job["with"]["matrix"] == f"${{{{ needs.changes.outputs.{cloud} }}}}"
        assert "github.event_name == 'push'" in job["if"]
    assert not ({"build", "promote"} & set(jobs)), "no job spans every cloud"


def test_each_cloud_signs_with_its_own_key() -> None:
    jobs = load("build.yml")["jobs"]
    signers = {c: jobs[c]["with"]["signer"] for c in CLOUDS}
    assert signers == {c: f"${{{{ vars.IMAGECTL_ATTESTATION_SIGNER_{c.upper()} }}}}"
                       for c in CLOUDS}  # fmt: skip
    called = load("cloud-build.yml")["jobs"]
    for name in ("build", "promote"):
        assert called[name]["env"]["IMAGECTL_ATTESTATION_SIGNER"] == "${{ inputs.signer }}"
    # and only that cloud's credentials: each credential step runs for its own cloud
    for job in called.values():
        for step in job["steps"]:
            uses = str(step.get("uses", ""))
            for action, cloud in (("aws-actions/configure-aws-credentials", "aws"),
                                  ("google-github-actions/auth", "gcp"),
                                  ("azure/login", "azure")):  # fmt: skip
                if uses.startswith(action):
                    assert step["if"] == f"inputs.cloud == '{cloud}'"


def test_doctor_runs_before_the_build_and_validation_uses_the_runner_address() -> None:
    build = load("cloud-build.yml")["jobs"]["build"]
    commands = [w[0] for w in _commands(build)]
    assert commands.index("doctor") < commands.index("build") < commands.index("validate-image")
    runner = next(s for s in build["steps"] if s.get("id") == "runner")
    assert "checkip.amazonaws.com" in runner["run"] and "/32" in runner["run"]
    for words in _commands(build):
        if words[0] in ("doctor", "validate-image"):
            assert "--runner-cidr" in words, words
    for step in build["steps"]:
        if "doctor" in str(step.get("run", "")) or "validate-image" in str(step.get("run", "")):
            assert step["env"]["RUNNER_CIDR"] == "${{ steps.runner.outputs.cidr }}"


def test_the_promote_job_promotes_the_image_its_build_job_validated() -> None:
    jobs = load("cloud-build.yml")["jobs"]
    build, promote = jobs["build"], jobs["promote"]
    assert promote["needs"] == "build"
    assert "!cancelled()" in promote["if"]  # a failed stack does not skip the others
    assert promote["environment"] == "production"
    upload = next(s for s in build["steps"] if "upload-artifact" in str(s.get("uses")))
    download = next(s for s in promote["steps"] if "download-artifact" in str(s.get("uses")))
    assert upload["with"]["name"] == download["with"]["name"]
    assert "${{ matrix.stack }}" in upload["with"]["name"]
    assert "${{ matrix.cloud }}" in upload["with"]["name"]
    # the artifact is written after validation decided, from its JSON
    names = [s.get("name", "") for s in build["steps"]]
    validated = [i for i, s in enumerate(build["steps"]) if "validate-image" in str(s.get("run"))]
    assert names.index(upload["name"]) > validated[0]
    (words,) = [w for w in _commands(promote) if w[0] == "promote"]
    assert words[1] == "$IMAGE"  # an image id, never only --stack
    image_env = next(s for s in promote["steps"] if "promote" in str(s.get("run", "")).split()
                     )["env"]["IMAGE"]  # fmt: skip
    assert image_env == "${{ steps.candidate.outputs.image }}"


def test_manual_promotion_names_its_image() -> None:
    image = load("promote.yml")
    on = image.get("on", image.get(True))
    assert on["workflow_dispatch"]["inputs"]["image"]["required"] is True
