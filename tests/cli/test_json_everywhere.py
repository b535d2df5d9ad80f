"""``--json`` on every command that prints a result: each command and
sub-command of the registry takes it; ``snapshot`` (the last without one besides
``collectives``, which always printed JSON) prints a machine-readable summary."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tests.cli.commands import every_command

# commands whose output is not a result; each with why
NOT_A_RESULT: dict[str, str] = {}  # watch prints each look with --json too


def test_every_command_takes_json() -> None:
    commands = every_command()
    assert len(commands) > 25
    missing = [
        name
        for name, cmd in commands
        if name.split()[0] not in NOT_A_RESULT
        and not any(isinstance(p, click.Option) and "--json" in p.opts for p in cmd.params)
    ]
    assert missing == []


def test_snapshot_json(tmp_path: Path, cli) -> None:
    out = tmp_path / "snap.json"
    result = cli("snapshot", "-o", str(out), "--no-nccl-probe", "--description", "t", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["snapshot"] == str(out) and out.is_file()
    assert doc["gpus"] == len(json.loads(out.read_text())["nvml"]["devices"])
    assert doc["description"] == "t"
