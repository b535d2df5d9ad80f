"""Drift reports per stack and per check: a check that cannot run (an
unreachable NVIDIA index, a cloud without credentials) is an error in the report beside the
results the other checks computed, never an exit 2 with empty output. Exit codes: 0 every
check ran and found nothing, 1 drift found or a check could not run, 2 bad input."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from drift_helpers import edit
from test_drift_upstream_debian import mirror, use_mirror  # noqa: F401 (the fixture)

STACKS = ("--stack", "h100-training", "--stack", "local")
CREDENTIAL_VARS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_USERNAME",
    "AZURE_FEDERATED_TOKEN_FILE",
)  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def no_cloud_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials for AWS, Google Cloud or Azure (h100-training targets all three) and
    no metadata server; nothing reaches a real cloud from a test."""
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(home / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(home / "azure"))
    monkeypatch.setenv("IMAGECTL_AWS_ENDPOINT_URL", f"http://127.0.0.1:{_closed_port()}")


@pytest.fixture
def unreachable_nvidia(monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"http://127.0.0.1:{_closed_port()}/compute/cuda/repos"
    monkeypatch.setenv("IMAGECTL_NVIDIA_REPO_URL", url)
    return url


def _drift(cli, ws: Path, *args: str):  # type: ignore[no-untyped-def]
    return cli("--root", str(ws), "drift", *STACKS, *args)


@pytest.mark.usefixtures("no_cloud_credentials", "unreachable_nvidia")
def test_errors_beside_the_results_that_could_be_computed(cli, workspace_copy, mirror):  # noqa: F811
    use_mirror(workspace_copy, mirror)
    edit(workspace_copy, "local", '"6.1.0-56-cloud-amd64"', '"6.1.0-41-cloud-amd64"')
    result = _drift(cli, workspace_copy, "--upstream", "--replicas", "--fleet", "--json")
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    assert doc["complete"] is False
    by = {s["stack"]: s for s in doc["stacks"]}
    assert set(by) == {"h100-training", "local"}

    h100 = by["h100-training"]
    errors = {(e["source"], e["kind"]) for e in h100["errors"]}
    assert ("upstream", "unreachable") in errors  # the NVIDIA index
    assert ("fleet", "credentials") in errors  # AWS
    fleet = {e["cloud"]: e for e in h100["errors"] if e["source"] == "fleet"}
    assert set(fleet) == {"aws", "gcp", "azure"}  # each cloud on its own
    assert all(e["kind"] == "credentials" for e in fleet.values())
    assert "credentials" in fleet["aws"]["message"]
    assert all("\n" not in e["message"] for e in h100["errors"])  # one paragraph each
    assert h100["checks"]["upstream"]["status"] == "error"
    assert h100["checks"]["fleet"]["status"] == "error"
    assert h100["checks"]["replicas"]["status"] == "no drift"  # nothing promoted: computed

    local = by["local"]  # computed in full though the other stack's sources failed
    assert local["errors"] == []
    assert local["checks"]["upstream"]["status"] == "drift"
    assert {f["kind"] for f in local["findings"]} >= {"kernel-newer"}
    assert local["checks"]["fleet"]["status"] == "no drift"
    assert local["checks"]["replicas"]["status"] == "no drift"


@pytest.mark.usefixtures("no_cloud_credentials")
def test_clouds_without_credentials_are_errors_not_an_empty_exit_2(cli, workspace_copy):
    result = _drift(cli, workspace_copy, "--fleet", "--format", "json")
    assert result.code == 1, result.err
    doc = json.loads(result.out)  # never empty output
    h100 = next(s for s in doc["stacks"] if s["stack"] == "h100-training")
    assert sorted((e["cloud"], e["kind"]) for e in h100["errors"]) == [
        ("aws", "credentials"),
        ("azure", "credentials"),
        ("gcp", "credentials"),
    ]
    local = next(s for s in doc["stacks"] if s["stack"] == "local")
    assert local["errors"] == [] and local["checks"]["fleet"]["status"] == "no drift"


@pytest.mark.usefixtures("no_cloud_credentials", "unreachable_nvidia")
def test_markdown_and_table_name_the_checks_that_could_not_run(cli, workspace_copy, mirror):  # noqa: F811
    use_mirror(workspace_copy, mirror)
    md = _drift(cli, workspace_copy, "--upstream", "--fleet", "--format", "markdown")
    assert md.code == 1
    h100 = md.out.split("<!-- imagectl-drift:stack=local -->")[0]
    assert "Could not check" in h100 and "upstream" in h100 and "fleet" in h100
    assert "unreachable" in h100 and "credentials" in h100
    table = _drift(cli, workspace_copy, "--upstream", "--fleet")
    assert table.code == 1
    assert "could not check" in table.out.lower()
    assert "incomplete" in table.out


def test_every_check_ran_and_found_nothing_is_exit_0(cli, workspace_copy):
    result = cli("--root", str(workspace_copy), "drift", "--stack", "local", "--replicas",
                 "--json")  # fmt: skip
    assert result.code == 0, result.out + result.err
    doc = json.loads(result.out)
    assert doc["complete"] is True
    (local,) = doc["stacks"]
    assert local["errors"] == [] and local["checks"] == {
        "replicas": {"status": "no drift", "findings": 0, "errors": 0}
    }
