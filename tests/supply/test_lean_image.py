"""Nothing test-only goes into a fleet image.

Every image installs the validator's wheelhouse: exactly ``validators/requirements.lock``
(made from pyproject's ``[project].dependencies``), then imagectl itself ``--no-deps``. A
test runner there (pytest with pluggy and iniconfig, which pytest-testinfra brought in
when it was a core dependency) would ship to every node of the fleet and be run by none.
The provisioned image's own package list is read the same way in
``tests/ansible/test_debian_roles.py`` (``test_the_image_carries_no_test_runner``).
"""

from __future__ import annotations

import re
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

try:
    import tomllib  # type: ignore[import-not-found,unused-ignore]
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

from imagectl.packer.build import build_validator_wheel
from imagectl.paths import find_workspace
from imagectl.supply.lockfile import load

REPO = Path(__file__).resolve().parents[2]

# Test runners, their plugin machinery and the frameworks they drive (normalized names,
# PEP 503). Any "pytest-*" plugin counts too.
TEST_RUNNERS = frozenset(
    {
        "pytest",
        "pluggy",
        "iniconfig",
        "testinfra",
        "nose",
        "nose2",
        "tox",
        "unittest2",
        "hypothesis",
        "ward",
        "green",
        "stestr",
        "testtools",
    }
)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runners_among(names: list[str]) -> list[str]:
    """The names (any spelling) that are a test runner or a pytest plugin."""
    return sorted(
        n for n in names if normalize(n) in TEST_RUNNERS or normalize(n).startswith("pytest-")
    )


def _requirement_name(req: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    assert match, req
    return match[1]


def test_the_check_knows_a_runner_in_any_spelling() -> None:
    assert runners_among(["PyTest", "pytest_testinfra", "Pluggy", "click", "pytest-xdist"]) == [
        "Pluggy",
        "PyTest",
        "pytest-xdist",
        "pytest_testinfra",
    ]
    assert runners_among(["rich", "pydantic", "nvidia-ml-py", "pygments"]) == []


def test_the_validator_lock_installs_no_test_runner() -> None:
    """What the validator role installs into every image (the wheelhouse is this lock)."""
    lock = load(REPO / "validators" / "requirements.lock")
    names = [e.name for e in lock.entries]
    assert {"click", "pydantic", "nvidia-ml-py"} <= {normalize(n) for n in names}
    assert runners_among(names) == [], "a test runner would ship in every fleet image"


def test_core_dependencies_name_no_test_runner_and_the_extra_carries_testinfra() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = [_requirement_name(r) for r in project["dependencies"]]
    assert runners_among(core) == []
    extras = project["optional-dependencies"]
    assert {normalize(_requirement_name(r)) for r in extras["testinfra"]} >= {
        "pytest-testinfra",
        "pytest",
    }
    # where it runs: the development environment, which runs tests/ansible
    assert any("testinfra" in r for r in extras["dev"])


@pytest.mark.slow
def test_the_built_wheel_requires_no_test_runner_outside_an_extra(tmp_path: Path) -> None:
    """The metadata pip checks in the image (``pip check`` after ``--no-deps``): a core
    requirement on pytest would fail there, or pull it in anywhere else."""
    wheel = build_validator_wheel(find_workspace(REPO), tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(meta_name).decode())
    core = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert core, "the wheel names its core requirements"
    assert runners_among([_requirement_name(r) for r in core]) == []


def test_the_validator_reads_host_facts_without_a_test_framework() -> None:
    """The host facts were read through testinfra's local backend; the validator's own
    sources import no test framework now."""
    offenders = []
    for path in sorted((REPO / "validators").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for module in re.findall(r"^\s*(?:import|from)\s+([A-Za-z_][\w]*)", text, re.M):
            if normalize(module) in TEST_RUNNERS:
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert offenders == []
