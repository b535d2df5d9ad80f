"""``imagectl lint --junit FILE``: JUnit XML for CI like ``validate
--junit``: a test case per stack; a stack breaking a rule is a failure naming the rule, its
place, fix and source; a malformed stack file an error."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path


def _edit(ws: Path, stack: str, old: str, new: str) -> None:
    path = ws / "images" / "stacks" / f"{stack}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _cases(path: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    return suite, {c.get("name"): c for c in suite.iter("testcase")}


def test_every_stack_is_a_test_case_and_a_broken_rule_a_failure(
    cli, workspace_copy: Path, tmp_path: Path
) -> None:
    _edit(workspace_copy, "b200-training", "kernel_modules: open", "kernel_modules: proprietary")
    out = tmp_path / "lint.xml"
    result = cli("--root", str(workspace_copy), "lint", "--junit", str(out))
    assert result.code == 1
    suite, cases = _cases(out)
    stacks = sorted(p.stem for p in (workspace_copy / "images" / "stacks").glob("*.yaml"))
    assert sorted(cases) == stacks
    assert suite.get("name") == "imagectl.lint"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        str(len(stacks)), "1", "0"
    )  # fmt: skip
    (failure,) = cases["b200-training"].findall("failure")
    assert "MODULES-ARCH" in (failure.get("message") or "")
    assert "source:" in (failure.text or "") and "fix:" in (failure.text or "")
    for name in stacks:
        if name != "b200-training":
            assert not cases[name].findall("failure") and not cases[name].findall("error")


def test_a_malformed_stack_is_an_error(cli, workspace_copy: Path, tmp_path: Path) -> None:
    _edit(workspace_copy, "local", "clouds:", "clouds_typo:")
    out = tmp_path / "lint.xml"
    result = cli("--root", str(workspace_copy), "lint", "--stack", "local", "--junit", str(out))
    assert result.code == 2
    suite, cases = _cases(out)
    assert suite.get("errors") == "1" and cases["local"].findall("error")
