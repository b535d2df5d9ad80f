"""The workflows hand out as little as they can: every job has a time limit, no checkout
leaves the job's token in .git/config, the catalog's database secret reaches only jobs
that cannot run a pull request's code, and the reaper has a role of its own.

References: GitHub Actions "Security hardening for GitHub Actions" (secrets and
pull requests, least privilege) and actions/checkout's ``persist-credentials`` input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SECRET = "secrets.IMAGECTL_DATABASE_URL"


def _load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def _triggers(doc: Any) -> set[str]:
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` as True
    return set(on) if isinstance(on, dict) else {on} if isinstance(on, str) else set(on)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_job_has_a_timeout_and_checkouts_keep_no_token(path: Path) -> None:
    for name, job in _load(path)["jobs"].items():
        if "uses" in job:  # a reusable workflow's call: its own jobs carry the limits
            continue
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}: job {name}"
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert (step.get("with") or {}).get("persist-credentials") is False, (
                    f"{path.name}: job {name} checks out with persisted credentials"
                )


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_the_database_secret_never_reaches_pull_request_code(path: Path) -> None:
    doc = _load(path)
    if "pull_request" not in _triggers(doc) and "pull_request_target" not in _triggers(doc):
        return
    assert SECRET not in str(doc.get("env", {})), f"{path.name}: secret in workflow env"
    for name, job in doc["jobs"].items():
        if SECRET not in str(job):
            continue
        condition = str(job.get("if", ""))
        assert "github.event_name == 'push'" in condition, (
            f"{path.name}: job {name} holds the database secret but may run for a pull request"
        )


def test_build_jobs_that_record_hold_the_secret() -> None:
    """build.yml hands the secret only to its per-cloud calls (push only); in the called
    workflow only the jobs that record builds and promotions have it."""
    calls = _load(REPO / ".github" / "workflows" / "build.yml")["jobs"]
    passing = sorted(n for n, j in calls.items() if SECRET in str(j.get("secrets", {})))
    assert passing == ["aws", "azure", "gcp"]
    jobs = _load(REPO / ".github" / "workflows" / "cloud-build.yml")["jobs"]
    holders = sorted(n for n, j in jobs.items() if "secrets.IMAGECTL_DATABASE_URL" in
                     str(j.get("env", {})))  # fmt: skip
    assert holders == ["build", "promote"]


def test_the_reaper_has_its_own_narrow_role_and_no_catalog() -> None:
    text = (REPO / ".github" / "workflows" / "reap.yml").read_text()
    assert "AWS_REAP_ROLE_ARN" in text and "AWS_BUILD_ROLE_ARN" not in text
    assert "GCP_REAP_SERVICE_ACCOUNT" in text and "GCP_BUILD_SERVICE_ACCOUNT" not in text
    assert SECRET not in text
