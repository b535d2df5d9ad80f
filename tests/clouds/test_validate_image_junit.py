"""``imagectl validate-image --junit FILE``: JUnit XML for CI like
``validate --junit``: the decision and a test case per host, then each host's receipt as
its own suite, check by check. Run on the AWS protocol fake with the real validator
replaying an image fault (the wrong driver) on every host: the image is blocked."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.clouds.scenario import IMAGE_FAULT, write_override
from tests.fakes.fixtures import CloudEnv


@pytest.mark.parametrize("cloud_env", ["aws"], indirect=True)
def test_a_blocked_image_in_junit(cli: Any, cloud_env: CloudEnv, tmp_path: Path) -> None:
    image = cloud_env.seed_candidate()
    override = write_override(tmp_path, [IMAGE_FAULT, IMAGE_FAULT], cloud=cloud_env.cloud)
    out = tmp_path / "validate-image.xml"
    result = cli(
        "validate-image", image.image_id, "--cloud", cloud_env.cloud, "--stack",
        "h100-training", "--inventory-override", str(override), "--reach-timeout", "2",
        "--hosts", "2", "--json", "--junit", str(out),
    )  # fmt: skip
    assert result.code == 1, result.err
    data = result.json()
    assert data["state"] == "blocked"

    root = ET.parse(out).getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    top = suites.pop("imagectl.validate-image")
    props = {p.get("name"): p.get("value") for p in top.iter("property")}
    assert props["image_id"] == image.image_id and props["state"] == "blocked"
    cases = {c.get("name"): c for c in top.findall("testcase")}
    (decision,) = cases.pop("decision").findall("failure")
    assert "blocked" in (decision.get("message") or "")
    assert sorted(cases) == sorted(h["host"] for h in data["hosts"])
    for case in cases.values():
        (failure,) = case.findall("failure")
        assert "sw.driver.version" in (failure.get("message") or "")
    assert (top.get("tests"), top.get("failures"), top.get("errors")) == ("3", "3", "0")
    # every host's receipt, check by check, as validate --junit writes it
    assert sorted(suites) == sorted(f"imagectl.validate.{h}" for h in cases)
    for suite in suites.values():
        failing = {c.get("name") for c in suite.findall("testcase") if c.findall("failure")}
        assert "sw.driver.version" in failing
