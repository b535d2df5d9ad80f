"""The CLI starts fast: help for the group and every sub-command imports no heavy module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from imagectl.cli import COMMANDS

HEAVY = (
    "boto3",
    "botocore",
    "google.cloud",
    "googleapiclient",
    "azure",
    "torch",
    "sqlalchemy",
    "alembic",
    "pynvml",
    "testinfra",
    "ansible_runner",
    "moto",
)

PROBE = """
import io, json, sys, contextlib
from imagectl.cli import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    code = main(sys.argv[1:])
heavy = sorted({m for m in sys.modules for h in HEAVY if m == h or m.startswith(h + ".")})
print(json.dumps({"code": code, "heavy": heavy, "help": buf.getvalue()}))
"""


def probe(*args: str) -> dict:
    code = f"HEAVY = {HEAVY!r}\n" + PROBE
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_group_help_lists_every_command_without_importing_them() -> None:
    result = probe("--help")
    assert result["code"] == 0
    assert result["heavy"] == []
    for name in COMMANDS:
        assert name in result["help"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_subcommand_help_is_light(name: str) -> None:
    result = probe(name, "--help")
    assert result["code"] == 0
    assert result["heavy"] == [], f"`imagectl {name} --help` imported {result['heavy']}"
    assert "Usage:" in result["help"]


def test_unknown_command_is_exit_2(cli) -> None:
    result = cli("frobnicate")
    assert result.code == 2
    assert "No such command" in result.err
