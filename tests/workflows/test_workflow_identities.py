"""One path to production: every job that can move a pointer runs in the `production`
environment, and the identity it assumes is trusted only for that environment's OIDC
subject; the jobs without approval assume identities that move nothing.

Read from the repository itself: every workflow (`.github/workflows/*.yml`, reusable ones
through their callers) and every trust document (`images/permissions/trust/<cloud>/`).
A job's OIDC `sub` is `repo:OWNER/REPO:environment:NAME` when the job names an
environment, else `repo:OWNER/REPO:ref:refs/heads/BRANCH` for push, schedule and
workflow_dispatch (the default branch), `repo:OWNER/REPO:pull_request` for a pull request
(GitHub Docs, "About security hardening with OpenID Connect", "Example subject claims").
AWS trust policies match it with `StringEquals`/`StringLike` on
`token.actions.githubusercontent.com:sub` (IAM User Guide, "Configuring a role for GitHub
OIDC identity provider"); Google's workload identity principals name it as
`principal://.../subject/SUB` or a whole repository as `principalSet://.../attribute.
repository/OWNER/REPO`; an Azure federated credential's `subject` is matched exactly
(Microsoft Entra, "Configure an app to trust a GitHub repo").
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.workflows.test_workflow_commands import split_commands

REPO = Path(__file__).resolve().parents[2]
FLOWS = REPO / ".github" / "workflows"
TRUST = REPO / "images" / "permissions" / "trust"
PERMISSIONS = REPO / "images" / "permissions"
CLOUDS = ("aws", "gcp", "azure")
ENVIRONMENT = "production"
PREFIX = "repo:OWNER/REPO:"
# imagectl commands that move "latest" or the canary (block and revoke roll a promoted
# image back first; deprecate applies retention; rollout without --dry-run advances or
# moves the canary back)
POINTER_COMMANDS = {"promote", "rollback", "rollout", "block", "revoke", "deprecate"}
# the credential steps' inputs and the repository variables they read, per cloud
IDENTITY = re.compile(
    r"vars\.(?:(AWS)_([A-Z]+)_ROLE_ARN|(GCP)_([A-Z]+)_SERVICE_ACCOUNT|(AZURE)_([A-Z]+)_CLIENT_ID)"
)
# which permission documents each identity holds (README, "Run it on your accounts")
HOLDS = {
    "build": ("build", "validate", "sign"),
    "promote": ("promote", "sign"),
    "readonly": ("readonly",),
    "reap": ("reap",),
}
# AWS IAM tells a pointer write apart from every other call: the SSM parameters are the
# pointers (Systems Manager API reference, PutParameter / DeleteParameter)
AWS_POINTER_ACTIONS = {"ssm:PutParameter", "ssm:DeleteParameter"}


def _load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def _triggers(doc: Any) -> dict[str, Any]:
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return dict(on or {})


@dataclass(frozen=True)
class Job:
    flow: str
    name: str
    body: dict[str, Any]
    subjects: frozenset[str]

    def __str__(self) -> str:
        return f"{self.flow} / {self.name}"

    @property
    def environment(self) -> str | None:
        env = self.body.get("environment")
        return env.get("name") if isinstance(env, dict) else env

    def identities(self) -> set[tuple[str, str]]:
        """(cloud, identity) of every credential step."""
        out = set()
        for step in self.body.get("steps") or []:
            for m in IDENTITY.finditer(json.dumps(step.get("with") or {})):
                cloud, ident = [g for g in m.groups() if g]
                out.add((cloud.lower(), ident.lower()))
        return out

    def pointer_commands(self) -> list[list[str]]:
        out = []
        for step in self.body.get("steps") or []:
            for words in split_commands(str(step.get("run", ""))):
                if words and words[0] in POINTER_COMMANDS and "--dry-run" not in words:
                    out.append(words)
        return out


def _event_subjects(triggers: dict[str, Any], only_push: bool = False) -> set[str]:
    out = set()
    for event, spec in triggers.items():
        if only_push and event != "push":
            continue
        if event == "push":
            branches = (spec or {}).get("branches") or ["main"]
            out |= {f"ref:refs/heads/{b}" for b in branches}
        elif event in ("schedule", "workflow_dispatch"):
            out.add("ref:refs/heads/main")  # the default branch (dispatched from it)
        elif event in ("pull_request", "pull_request_target"):
            out.add("pull_request")
    return out


def jobs() -> list[Job]:
    docs = {p.name: _load(p) for p in sorted(FLOWS.glob("*.yml"))}
    # a reusable workflow runs with its callers' events
    called: dict[str, set[str]] = {}
    for doc in docs.values():
        for job in doc["jobs"].values():
            uses = str(job.get("uses", ""))
            if uses.startswith("./.github/workflows/"):
                only_push = "github.event_name == 'push'" in str(job.get("if", ""))
                called.setdefault(uses.rsplit("/", 1)[1], set()).update(
                    _event_subjects(_triggers(doc), only_push)
                )
    out = []
    for name, doc in docs.items():
        events = _event_subjects(_triggers(doc)) | called.get(name, set())
        for job_name, body in doc["jobs"].items():
            if "uses" in body:
                continue
            env = body.get("environment")
            env = env.get("name") if isinstance(env, dict) else env
            subjects = {f"environment:{env}"} if env else events
            out.append(Job(name, job_name, body, frozenset(PREFIX + s for s in subjects)))
    return out


def _exact(value: str) -> str:
    """An exact match as an fnmatch pattern (``*``, ``?`` and ``[`` taken literally)."""
    return re.sub(r"([*?\[])", r"[\1]", value)


def trusted(cloud: str, identity: str) -> list[str]:
    """The subjects (fnmatch patterns) the identity's trust document admits."""
    doc = json.loads((TRUST / cloud / f"{identity}.json").read_text())
    out: list[str] = []
    if cloud == "aws":
        for st in doc["Statement"]:
            if st.get("Effect") != "Allow":
                continue
            assert st["Action"] == "sts:AssumeRoleWithWebIdentity", st
            assert st["Principal"]["Federated"].endswith(
                ":oidc-provider/token.actions.githubusercontent.com"
            ), st
            conditions = st.get("Condition") or {}
            subs: list[str] = []
            for op, keys in conditions.items():
                value = keys.get("token.actions.githubusercontent.com:sub")
                if value is None:
                    continue
                values = value if isinstance(value, list) else [value]
                # StringEquals is exact: escape what fnmatch would read as a pattern
                subs += values if "Like" in op else [_exact(v) for v in values]
            aud = (conditions.get("StringEquals") or {}).get(
                "token.actions.githubusercontent.com:aud"
            )
            assert aud == "sts.amazonaws.com", f"aws/{identity}.json: no audience condition"
            out += subs or ["*"]  # no subject condition: any workflow of any repository
    elif cloud == "gcp":
        for binding in doc["bindings"]:
            if binding["role"] != "roles/iam.workloadIdentityUser":
                continue
            for member in binding["members"]:
                if "/subject/" in member:
                    out.append(member.split("/subject/", 1)[1])
                elif "/attribute.repository/" in member:
                    out.append(f"repo:{member.split('/attribute.repository/', 1)[1]}:*")
                else:
                    out.append("*")
    else:
        assert doc["issuer"] == "https://token.actions.githubusercontent.com"
        assert doc["audiences"] == ["api://AzureADTokenExchange"]
        out.append(_exact(doc["subject"]))
    return out


def admits(patterns: list[str], subject: str) -> bool:
    return any(fnmatch.fnmatchcase(subject, p) for p in patterns)


def pointer_identities() -> set[str]:
    """Identities whose jobs run a pointer-moving command, and on AWS any identity whose
    documents grant a pointer write."""
    found = {ident for job in jobs() if job.pointer_commands() for _c, ident in job.identities()}
    for ident, roles in HOLDS.items():
        for role in roles:
            doc = json.loads((PERMISSIONS / "aws" / f"{role}.json").read_text())
            for st in doc["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                if st.get("Effect") == "Allow" and AWS_POINTER_ACTIONS & set(actions):
                    found.add(ident)
    return found


def test_the_reader_sees_every_job_and_identity() -> None:
    found = {str(j) for j in jobs()}
    assert {"rollout.yml / decide", "rollout.yml / act", "promote.yml / promote",
            "rollback.yml / rollback", "cloud-build.yml / promote",
            "cloud-build.yml / build", "drift.yml / drift", "reap.yml / reap"} <= found  # fmt: skip
    used = {ident for j in jobs() for _c, ident in j.identities()}
    assert used == set(HOLDS), "an identity without documents, or documents no job uses"
    assert pointer_identities() == {"promote"}


def test_every_pointer_move_runs_in_the_protected_environment() -> None:
    outside = [f"{j}: imagectl {' '.join(w)}" for j in jobs() for w in j.pointer_commands()
               if j.environment != ENVIRONMENT]  # fmt: skip
    assert outside == [], "pointer-moving commands outside `production`:\n" + "\n".join(outside)


def test_pointer_writing_identities_are_assumed_only_in_the_environment() -> None:
    writers = pointer_identities()
    outside = [f"{j}: {c} {i}" for j in jobs() for c, i in sorted(j.identities())
               if i in writers and j.environment != ENVIRONMENT]  # fmt: skip
    assert outside == [], "the promote identity outside `production`:\n" + "\n".join(outside)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_pointer_writing_identities_trust_only_the_environment_subject(cloud: str) -> None:
    only = PREFIX + f"environment:{ENVIRONMENT}"
    for ident in pointer_identities():
        patterns = trusted(cloud, ident)
        assert patterns, f"{cloud}/{ident}.json trusts nobody"
        # every subject it admits is the environment's: try the others a job can carry
        others = [PREFIX + "ref:refs/heads/main", PREFIX + "ref:refs/heads/feature",
                  PREFIX + "pull_request", PREFIX + "environment:staging",
                  "repo:OTHER/REPO:environment:production"]  # fmt: skip
        assert [s for s in others if admits(patterns, s)] == [], (cloud, ident, patterns)
        assert patterns == [only], f"{cloud}/{ident}.json: {patterns}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_each_job_is_admitted_by_its_identity_and_nothing_wider(cloud: str) -> None:
    """The trust documents match the jobs: each job's subject is admitted by the identity
    it assumes (or it could not sign in), and no identity admits more subjects than its
    jobs carry."""
    carried: dict[str, set[str]] = {}
    for job in jobs():
        for c, ident in job.identities():
            if c != cloud:
                continue
            carried.setdefault(ident, set()).update(job.subjects)
            patterns = trusted(cloud, ident)
            for subject in job.subjects:
                assert admits(patterns, subject), f"{job}: {cloud}/{ident}.json refuses {subject}"
    for ident, subjects in carried.items():
        for pattern in trusted(cloud, ident):
            assert any(fnmatch.fnmatchcase(s, pattern) for s in subjects), (cloud, ident, pattern)
    assert sorted(p.stem for p in (TRUST / cloud).glob("*.json")) == sorted(HOLDS)


def test_the_reader_would_catch_the_unreviewed_decider() -> None:
    """The checks above on a decide job that assumes the promote identity without an
    environment and runs the rollout for real (the workflow before this test)."""
    body = {
        "steps": [
            {"uses": "aws-actions/configure-aws-credentials@x",
             "with": {"role-to-assume": "${{ vars.AWS_PROMOTE_ROLE_ARN }}"}},
            {"run": 'imagectl rollout --stack "$S" --cloud aws --dry-run --json || true\n'
                    'imagectl rollout --stack "$S" --cloud aws || [ $? -eq 3 ]'},
        ]
    }  # fmt: skip
    job = Job("rollout.yml", "decide", body, frozenset({PREFIX + "ref:refs/heads/main"}))
    assert job.identities() == {("aws", "promote")}
    assert [w[0] for w in job.pointer_commands()] == ["rollout"]  # the dry run is not one
    assert job.environment != ENVIRONMENT
    assert not admits(trusted("aws", "promote"), next(iter(job.subjects)))
    wide = ["repo:OWNER/REPO:*"]
    assert admits(wide, PREFIX + "ref:refs/heads/main")
