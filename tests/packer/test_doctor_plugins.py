"""``imagectl doctor`` says when the Packer a build would run lacks a pinned plugin.

Current Packer builds only with the plugins ``images/<cloud>/plugins.pkr.hcl`` pins,
installed by ``packer init`` where Packer's documentation ("Installing Plugins") puts them:
``$PACKER_PLUGIN_PATH/<host>/<namespace>/<name>/packer-plugin-<name>_v<version>_x<api>_<os>_<arch>``.
The packer here is Debian's 1.6.6 (builders built in); current Packer is a stand-in script
answering ``packer version`` as Packer 1.15.4 prints it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.doctor.findings import BLOCKER, OK
from imagectl.packer.binary import find_packer
from imagectl.packer.plugins import packer_plugins, required_plugins
from tests.support import REPO, require_tool

AWS = REPO / "images" / "aws"


@pytest.fixture
def current_packer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    packer = tmp_path / "bin" / "packer"
    packer.parent.mkdir()
    packer.write_text("#!/bin/sh\necho 'Packer v1.15.4'\n")
    packer.chmod(0o755)
    monkeypatch.setenv("IMAGECTL_PACKER", str(packer))
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    monkeypatch.setenv("PACKER_PLUGIN_PATH", str(plugins))
    return plugins


def _install(plugins: Path, source: str, version: str) -> None:
    name = source.rsplit("/", 1)[-1]
    folder = plugins / source
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / f"packer-plugin-{name}_v{version}_x5.0_linux_amd64"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (folder / f"{binary.name}_SHA256SUM").write_text("0" * 64 + "\n")


def test_the_pins_are_read_from_plugins_pkr_hcl() -> None:
    assert required_plugins(AWS) == {
        "github.com/hashicorp/amazon": "1.8.2",
        "github.com/hashicorp/ansible": "1.1.6",
    }


def test_missing_plugins_block_and_name_packer_init(current_packer: Path) -> None:
    _install(current_packer, "github.com/hashicorp/amazon", "1.8.1")  # not the pinned one
    (finding,) = packer_plugins(AWS)
    assert finding.status == BLOCKER
    assert "github.com/hashicorp/amazon 1.8.2" in finding.message
    assert "github.com/hashicorp/ansible 1.1.6" in finding.message
    assert finding.fix == f"packer init {AWS / 'plugins.pkr.hcl'}"


def test_the_pinned_plugins_installed_pass(current_packer: Path) -> None:
    for source, version in required_plugins(AWS).items():
        _install(current_packer, source, version)
    (finding,) = packer_plugins(AWS)
    assert finding.status == OK and "amazon 1.8.2" in finding.message, finding


def test_debians_packer_needs_no_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGECTL_PACKER", require_tool("packer"))
    binary = find_packer()
    if binary.supports_plugin_blocks:
        pytest.skip(f"the packer here is {binary.version_text}, not one with built-in builders")
    (finding,) = packer_plugins(AWS, binary)
    assert finding.status == OK and "built in" in finding.message


def test_doctor_reports_it(cli, current_packer: Path) -> None:
    result = cli("doctor", "--stack", "h100-training", "--cloud", "aws",
                 "--runner-cidr", "203.0.113.7/32", "--json")  # fmt: skip
    import json

    findings = json.loads(str(result.out))["findings"]
    (packer,) = [f for f in findings if f["check"] == "packer"]
    assert packer["status"] == "blocker" and "packer init" in packer["fix"]
