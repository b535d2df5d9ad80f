"""The host-side commands live with the validator (imagectl.validators.commands) and take
what only the controller knows from the root group's hooks: under the
controller's ``imagectl`` group they read the workspace and ``--stack``; under a group
without the hooks (the validator alone) they read the images shipped in the package and
refuse ``--stack`` in one paragraph."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from validator_support import SNAPSHOTS

from imagectl.cli import cli
from imagectl.cli.hostside import HOOKS
from imagectl.core.errors import UserError
from imagectl.validators.commands.controller import STANDALONE, hooks
from imagectl.validators.commands.validate import command as validate


def _alone() -> click.Group:
    group = click.Group("imagectl")
    group.add_command(validate)
    return group


def test_the_controller_group_hands_in_its_hooks() -> None:
    with click.Context(cli) as ctx:
        assert hooks(ctx) is HOOKS
        assert HOOKS.stack_expectations is not None
        assert set(HOOKS.completers) == {"stack", "shape", "gpu"}


def test_a_group_without_hooks_is_the_validator_alone() -> None:
    with click.Context(_alone()) as ctx:
        assert hooks(ctx) is STANDALONE
        assert STANDALONE.stack_expectations is None
        assert (STANDALONE.images_dir(ctx) / "catalog" / "shapes.yaml").is_file()


def test_stack_without_the_controller_is_refused() -> None:
    path = SNAPSHOTS / "healthy/h100-sxm-8x.json"
    result = CliRunner().invoke(
        _alone(), ["validate", "--replay", str(path), "--stack", "base"], catch_exceptions=True
    )
    assert isinstance(result.exception, UserError), result.output
    assert "needs the controller" in str(result.exception)
    assert "--expect" in result.exception.render()


@pytest.mark.parametrize("group", ["controller", "alone"])
def test_a_replay_with_a_shape_is_judged_either_way(group: str, tmp_path: Path) -> None:
    snap = json.loads((SNAPSHOTS / "healthy/h100-sxm-8x.json").read_text())
    del snap["host"]["expect_file"]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    runner = CliRunner()
    args = ["validate", "--replay", str(path), "--shape", "p5.48xlarge", "--json"]
    result = runner.invoke(cli if group == "controller" else _alone(), args)
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["expectations"]["gpu_count"] == 8


def test_the_host_side_commands_are_the_validators_modules() -> None:
    """validate, snapshot, collectives and verify-node are registered from
    imagectl.validators.commands, and every command module there (but the hooks and the
    shared options) is registered."""
    from imagectl.cli import COMMANDS

    host = {"validate", "snapshot", "collectives", "verify-node"}
    registered = {
        name for name, (module, _) in COMMANDS.items()
        if module.startswith("imagectl.validators.commands.")
    }  # fmt: skip
    assert registered == host
    folder = Path(validate.__module__.replace(".", "/")).parent.name
    assert folder == "commands"
    here = Path(__file__).resolve().parents[2] / "validators" / "commands"
    modules = {p.stem for p in here.glob("*.py")} - {"__init__", "controller", "options"}
    assert modules == {name.replace("-", "_") for name in host}
