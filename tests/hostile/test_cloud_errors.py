"""Cloud failures the user must fix: no credentials, an endpoint nobody listens on. The
real SDKs (botocore, google-auth/google-cloud-compute, azure-identity/azure-mgmt) fail as
they do on a machine without an account; imagectl must answer with one paragraph and
exit 2. ``--inventory-override`` is read before any cloud call."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support import REPO

CLOUDS = ("aws", "gcp", "azure")
ENDPOINT_VARS = {
    "aws": "IMAGECTL_AWS_ENDPOINT_URL",
    "gcp": "IMAGECTL_GCP_ENDPOINT",
    "azure": "IMAGECTL_AZURE_ENDPOINT",
}


def _closed_port() -> int:
    """A localhost port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def no_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment with no cloud credentials anywhere and no metadata server."""
    for name in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
        "AWS_ENDPOINT_URL", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE",
        *ENDPOINT_VARS.values(),
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "CLOUDSDK_CONFIG": str(home / "gcloud"),
        "NO_GCE_CHECK": "True",
        "GCE_METADATA_HOST": f"127.0.0.1:{_closed_port()}",
        "AZURE_CONFIG_DIR": str(home / "azure"),
    }


def _commands(cloud: str) -> list[tuple[str, ...]]:
    return [
        (
            "validate-image",
            "img-0123",
            "--cloud",
            cloud,
            "--stack",
            "h100-training",
            "--runner-cidr",
            "203.0.113.7/32",
        ),
        ("deprecate", "--stack", "h100-training", "--cloud", cloud),
    ]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_no_credentials(cloud: str, no_account: dict[str, str], hostile) -> None:
    for args in _commands(cloud):
        res = hostile("--root", str(REPO), *args, env=no_account, timeout=60)
        assert "credentials" in res.text, res.text
        assert res.err.count("error:") == 1 and len(res.err.strip().split("\n\n")) == 1


@pytest.mark.parametrize("cloud", CLOUDS)
def test_unreachable_endpoint(cloud: str, no_account: dict[str, str], hostile) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    env = {
        **no_account,
        ENDPOINT_VARS[cloud]: url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AZURE_CLIENT_ID": "00000000-0000-0000-0000-000000000001",
        "AZURE_TENANT_ID": "00000000-0000-0000-0000-000000000002",
        "AZURE_CLIENT_SECRET": "testing",
    }
    # validate-image only: deprecate goes through the same translation (no-credentials
    # test above), and each SDK's retries make this the slowest case of the suite
    args = _commands(cloud)[0]
    res = hostile("--root", str(REPO), *args, env=env, timeout=60)
    assert "cannot reach the cloud API" in res.text or "credentials" in res.text, res.text
    assert res.err.count("error:") == 1


@pytest.mark.parametrize("cloud", CLOUDS)
def test_inventory_override_is_read_before_any_cloud_call(
    cloud: str, no_account: dict[str, str], tmp_path: Path, hostile
) -> None:
    bad = tmp_path / "override.yaml"
    bad.write_text("all: [unclosed\n")
    missing = tmp_path / "missing.yaml"
    for path in (bad, missing):
        res = hostile(
            "--root", str(REPO), "validate-image", "img-0123", "--cloud", cloud, "--stack",
            "h100-training", "--inventory-override", str(path), env=no_account, timeout=30,
        )  # fmt: skip
        assert str(path) in res.text and "credentials" not in res.text, res.text
