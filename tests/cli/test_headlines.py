"""Honest headlines: a command whose checks did not all run says
so on its first line ("N of M checks could not run: ..."), before any all-clear, in one
wording (``imagectl.headline``); the exit codes stay as they were. Every command of
``HEADLINED`` is exercised with a check that cannot run: no cloud credentials (drift,
reap, doctor), a catalog stack this checkout has no file for (status), an offline verify
without a revocation list (``tests/provenance/test_state_trust.py``).

And ``status`` shows a replica region's image as a copy, with its source's shape verdicts
(it was "missing" everywhere but the validation region after a validated promotion).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.headline import all_clear, could_not_run
from imagectl.promotion import records as rec
from tests.support import make_receipt

HEADLINE = re.compile(r"^\d+ of \d+ [a-z ]+ could not run: ")
HEADLINED = ("drift", "reap", "doctor", "status", "verify")
CREDENTIAL_VARS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_USERNAME",
    "AZURE_FEDERATED_TOKEN_FILE", "IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL",
)  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS credentials and no metadata server: nothing reaches a real cloud."""
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", f"http://127.0.0.1:{_closed_port()}/repos")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _before(text: str, first: str, then: str) -> bool:
    return text.index(first) < text.index(then)


def test_the_wording() -> None:
    assert could_not_run(5, []) is None
    assert could_not_run(5, ["a", "b"]) == "2 of 5 checks could not run: a; b"
    assert HEADLINE.match(could_not_run(2, ["x"], "account checks") or "")
    assert all_clear("no drift", []) == "no drift"
    assert all_clear("no drift", ["x"]) == "no drift by the checks that ran"


@pytest.mark.usefixtures("no_credentials")
def test_reap_says_first_that_an_account_could_not_be_listed(cli) -> None:
    result = cli("reap", "--cloud", "aws", "--stack", "h100-training")
    assert result.code == 1
    first = _first_line(result.out)
    assert HEADLINE.match(first), result.out
    assert "aws (h100-training) instances" in first
    assert "no expired imagectl instances or placements by the checks that ran" in result.out
    assert _before(result.out, first, "no expired")
    doc = cli("reap", "--cloud", "aws", "--stack", "h100-training", "--json").json()
    assert doc["complete"] is False and HEADLINE.match(doc["headline"])
    assert doc["checks"]["total"] == 2 and len(doc["checks"]["could_not_run"]) == 2


@pytest.mark.usefixtures("no_credentials")
def test_drift_says_first_which_checks_did_not_run(cli) -> None:
    result = cli("drift", "--stack", "h100-training", "--fleet", "--upstream")
    assert result.code == 1
    first = _first_line(result.out)
    assert HEADLINE.match(first), result.out
    assert "fleet of h100-training (aws, azure, gcp)" in first
    assert "upstream of h100-training" in first
    # never a bare "no drift" for a stack whose checks did not all run
    assert not re.search(r"h100-training: no drift\s*$", result.out, re.M)
    # the cloud's error no longer advises leaving out options that were never passed
    flat = " ".join(result.out.split())
    assert "leave out" not in flat
    assert "`imagectl drift --upstream --hosts catalog`" in flat
    doc = json.loads(cli("drift", "--stack", "h100-training", "--fleet", "--json").out)
    assert doc["complete"] is False and doc["headline"].startswith("1 of 1 checks")
    markdown = cli("drift", "--stack", "h100-training", "--fleet", "--format", "markdown").out
    lines = [ln for ln in markdown.splitlines() if ln.strip()]
    assert lines[2].startswith("**1 of 1 checks could not run: fleet")  # under the title


@pytest.mark.usefixtures("no_credentials")
def test_doctor_says_first_which_account_checks_did_not_run(cli) -> None:
    result = cli("doctor", "--stack", "h100-training", "--cloud", "aws",
                 "--runner-cidr", "203.0.113.7/32")  # fmt: skip
    assert result.code == 1
    first = _first_line(result.out)
    assert first.startswith("4 of 5 account checks could not run: permissions; quota; "), first
    doc = cli("doctor", "--stack", "h100-training", "--cloud", "aws",
              "--runner-cidr", "203.0.113.7/32", "--json").json()  # fmt: skip
    assert doc["complete"] is False
    assert doc["not_checked"] == ["permissions", "quota", "capacity", "resources"]


def test_the_placeholder_organization_arn_is_named_whole_with_its_own_fix(
    no_credentials: None, cli
) -> None:
    doc = cli("doctor", "--stack", "h100-training", "--cloud", "aws",
              "--runner-cidr", "203.0.113.7/32", "--json").json()  # fmt: skip
    (org,) = [f for f in doc["findings"] if "organizations" in f["message"]]
    arn = "arn:aws:organizations::111122223333:organization/o-exampleorgid"
    assert f"'{arn}'" in org["message"]
    assert "organization's ARN" in org["fix"] and "account id" not in org["fix"]


def _catalog_with_a_promotion(url: str, stack: str = "h100-training") -> None:
    """A validated image of ``stack`` in us-east-1 (receipt on p5.48xlarge) promoted to a
    second region: the copy in us-west-2 carries the source's catalog id."""
    catalog = open_catalog(url)
    with catalog.transaction() as s:
        build = repo.record_build(s, build_id="b-1", stack=stack, stack_digest="sha256:01",
                                  cloud="aws")  # fmt: skip
        src = repo.record_image(s, build=build, cloud_image_id="ami-0aaa", region="us-east-1",
                                state="validated")  # fmt: skip
        repo.record_receipt(s, src, shape="p5.48xlarge", host="i-1",
                            receipt=make_receipt("ami-0aaa", stack, "sha256:01"))  # fmt: skip
        copy = repo.record_image(s, build=build, cloud_image_id="ami-0bbb", region="us-west-2",
                                 state="validated", tags={rec.TAG_SOURCE: src.id})  # fmt: skip
        promo = repo.start_promotion(s, src, target_regions=["us-east-1", "us-west-2"])
        repo.set_pointer(s, stack, "aws", "us-east-1", src)
        repo.set_pointer(s, stack, "aws", "us-west-2", copy)
        repo.finish_promotion(s, promo, completed_regions=["us-east-1", "us-west-2"])
    catalog.close()


def test_status_shows_a_replica_as_a_copy_with_its_sources_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", url)
    _catalog_with_a_promotion(url)
    doc = cli("status", "--stack", "h100-training", "--json").json()
    (entry,) = [e for e in doc["stacks"] if e["cloud"] == "aws"]
    by_region = {row["region"]: row["image"] for row in entry["current"]}
    copy = by_region["us-west-2"]
    assert copy["copy_of"] == {"id": by_region["us-east-1"]["id"], "cloud_image_id": "ami-0aaa",
                               "region": "us-east-1"}  # fmt: skip
    assert copy["shapes_passed"] == ["p5.48xlarge"]
    assert copy["shapes_missing"] == []
    assert by_region["us-east-1"]["copy_of"] is None
    table = " ".join(cli("status", "--stack", "h100-training").out.split())
    assert "ami-0bbb (copy of ami-0aaa in us-east-1)" in table
    assert "p5.48xlarge pass (of its source)" in table
    assert "p5.48xlarge missing" not in table


def test_status_says_first_when_a_stack_cannot_be_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", url)
    _catalog_with_a_promotion(url, stack="gone-stack")  # no such file in this checkout
    result = cli("status")
    first = _first_line(result.out)
    assert HEADLINE.match(first), result.out
    assert "the shapes of gone-stack on aws" in first
    doc = cli("status", "--json").json()
    assert doc["complete"] is False and HEADLINE.match(doc["headline"])


def test_every_headlined_command_is_exercised_here() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    for name in HEADLINED:
        if name == "verify":
            text = (Path(__file__).parents[1] / "provenance" / "test_state_trust.py").read_text()
            assert "could not run: revocation" in text
        else:
            assert f'cli("{name}"' in source, name


def test_doctor_counts_a_check_that_cannot_read_what_it_needs() -> None:
    from imagectl.cli.doctor import not_checked
    from imagectl.doctor.findings import BLOCKER, OK, Finding

    found = [
        Finding("credentials", OK, "AWS account 111122223333 as arn:aws:iam::1:role/ci"),
        Finding("permissions", BLOCKER, "cannot simulate arn's policies: AccessDenied", "grant"),
        Finding("quota", OK, "P instances: 192 vCPUs, 192 needed"),
    ]
    assert not_checked(found, "aws") == [
        "permissions (cannot simulate arn's policies: AccessDenied)"
    ]
    assert not_checked(found[:1] + found[2:], "aws") == []
    assert not_checked([Finding("credentials", BLOCKER, "refused")], "aws") == [
        "permissions",
        "quota",
        "capacity",
        "resources",
    ]
    assert not_checked([], "local") == []  # no account to check


@pytest.mark.usefixtures("no_credentials")
def test_plan_without_credentials_is_one_paragraph_per_cloud_naming_offline(cli) -> None:
    result = cli("plan", "--cloud", "aws")
    assert result.code == 2
    paragraphs = [ln for ln in result.err.splitlines() if "base image not resolved" in ln]
    assert len(paragraphs) == 1, result.err  # one cloud, one cause: not one per stack
    assert re.match(r"aws: base image not resolved for [\w-]+, [\w-]+", paragraphs[0])
    assert "`imagectl plan --offline`" in result.err
    assert cli("plan", "--cloud", "aws", "--offline").code == 0
