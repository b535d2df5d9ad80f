"""The options the host-side commands and ``validate-image`` share are declared once
(``imagectl.validators.commands.options``): every host-side command
registered from ``imagectl.validators.commands``, ``validate-image`` and ``compat check``
are walked, and each option of a shared name must be the shared declaration (a
``SharedOption``), with the same flags, destination, type, default and completion
wherever it appears. A command that writes its own ``--shape`` or ``--expect`` fails here."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, get_args

import click
import pytest

from imagectl.cli import COMMANDS
from imagectl.validators.commands import options
from imagectl.validators.commands.options import SharedOption
from tests.cli.commands import every_command

# controller commands that take the validator's options beside the host-side ones
ALSO = ("validate-image", "compat check")
# an option named like a shared one that is another thing; each with why
NOT_SHARED = {
    ("validate-image", "--nodes"): "how many hosts to launch together, not a hostfile",
}
# what a command chooses through each keyword of a shared option's decorator
CHOOSES = {
    "help": {"help"},
    "default_source": {"help"},  # --expect's help names what is read without it
    "default": {"default", "show_default"},
    "required": {"required"},
    "loaded_only": {"type"},  # a subset of the profiles
}


def _commands() -> list[tuple[str, click.Command]]:
    host = {
        name for name, (module, _) in COMMANDS.items()
        if module.startswith("imagectl.validators.commands.")
    }  # fmt: skip
    return [(name, cmd) for name, cmd in every_command() if name in host or name in ALSO]


def _declarations() -> dict[str, tuple[SharedOption, set[str]]]:
    """Each shared option as its decorator makes it (called with a placeholder), and the
    fields a command chooses through the decorator's keywords."""
    out: dict[str, tuple[SharedOption, set[str]]] = {}
    for name, factory in inspect.getmembers(options, inspect.isfunction):
        if not name.endswith("_option") or factory.__module__ != options.__name__:
            continue
        made = factory("placeholder")(lambda: None).__click_params__[0]
        assert isinstance(made, SharedOption), name
        chosen = set()
        for keyword in inspect.signature(factory).parameters:
            assert keyword in CHOOSES, f"{name}({keyword}=): say what it lets a command choose"
            chosen |= CHOOSES[keyword]
        out[made.key] = (made, chosen)
    return out


def _fields(option: click.Option) -> dict[str, object]:
    info = option.to_info_dict()
    info["completes"] = option._custom_shell_complete is not None  # type: ignore[attr-defined]
    info["callback"] = option.callback
    info["class"] = type(option)
    return info


def drift(commands: list[tuple[str, click.Command]]) -> list[str]:
    """Every departure from the shared declarations in ``commands``, one line each."""
    shared = _declarations()
    by_flag = {flag: key for key, (opt, _) in shared.items() for flag in opt.opts}
    found = []
    for name, cmd in commands:
        for param in cmd.params:
            if not isinstance(param, click.Option):
                continue
            keys = {by_flag[f] for f in param.opts if f in by_flag}
            if not keys or any((name, f) in NOT_SHARED for f in param.opts):
                continue
            if not isinstance(param, SharedOption) or {param.key} != keys:
                found.append(f"{name} {'/'.join(param.opts)}: declared by hand, not by options.py")
                continue
            declared, chosen = shared[param.key]
            want, got = _fields(declared), _fields(param)
            for field in sorted((set(want) | set(got)) - chosen):
                if want.get(field) != got.get(field):
                    found.append(f"{name} {param.opts[0]}: {field} {got.get(field)!r}")
            if "type" in chosen and not _narrower(param.type, declared.type):
                found.append(f"{name} {param.opts[0]}: type {param.type!r}")
    return found


def _narrower(got: click.ParamType, want: click.ParamType) -> bool:
    """A choice of some of the shared choices, in their order (collectives' profiles)."""
    if not (isinstance(got, click.Choice) and isinstance(want, click.Choice)):
        return got.to_info_dict() == want.to_info_dict()
    return bool(got.choices) and [c for c in want.choices if c in got.choices] == list(got.choices)


def test_every_shared_option_is_the_one_declaration() -> None:
    commands = _commands()
    names = {name for name, _ in commands}
    assert {"validate", "snapshot", "collectives", "verify-node", *ALSO} <= names
    uses = [
        (name, p.key) for name, cmd in commands for p in cmd.params if isinstance(p, SharedOption)
    ]
    assert len(uses) >= 25
    # every declaration is used by at least two commands, or it is not shared
    used = {key for _, key in uses}
    assert used == set(_declarations())  # a declaration no command uses is dead
    for key in used:
        assert len([n for n, k in uses if k == key]) >= 2, key
    assert drift(commands) == []


def test_json_is_the_cores_everywhere() -> None:
    for name, cmd in _commands():
        (flag,) = [p for p in cmd.params if isinstance(p, click.Option) and "--json" in p.opts]
        assert (flag.opts, flag.name, flag.is_flag, flag.multiple) == (
            ["--json"], "as_json", True, False,
        ), name  # fmt: skip


def _marked(key: str, decls: list[str], type: click.ParamType) -> SharedOption:
    """An option that claims a shared declaration's key without being made by it."""
    option = SharedOption(decls, type=type)
    option.key = key
    return option


@pytest.mark.parametrize(
    "option",
    [
        click.Option(["--shape"], help="The machine shape (images/catalog/shapes.yaml)."),
        click.Option(["--expect", "expect_file"], type=click.Path(dir_okay=False)),
        _marked("profile", ["--profile"], type=click.Choice(["quick", "boot"])),
        _marked("device", ["--device"], type=click.Choice(["auto", "cuda", "cpu"])),
    ],
    ids=["shape-by-hand", "expect-by-hand", "profiles-reordered", "device-without-default"],
)
def test_a_command_that_drifts_is_caught(option: click.Option) -> None:
    rogue = click.Command("rogue", params=[option], callback=lambda **_: None)
    found = drift([("rogue", rogue)])
    assert found and all(line.startswith(f"rogue {option.opts[0]}") for line in found)


def test_the_profiles_are_the_validators_and_the_stacks() -> None:
    from imagectl.stacks.schema import Profile
    from imagectl.validators.checks.base import ALL_PROFILES, LOADED_PROFILES

    assert set(options.PROFILES) == ALL_PROFILES
    assert set(options.LOADED_PROFILES) == LOADED_PROFILES
    assert get_args(Profile) == options.PROFILES


@pytest.mark.parametrize("command", ["validate", "collectives"])
def test_a_missing_hostfile_is_exit_2_on_both(command: str, cli: Any, tmp_path: Path) -> None:
    """``--nodes FILE`` checks its file once, for both commands, before anything runs."""
    missing = tmp_path / "hosts"
    result = cli(command, "--nodes", str(missing), "--json")
    assert result.code == 2, result.out + result.err
    assert f"cannot read the --nodes hostfile {missing}: no such file" in " ".join(
        result.err.split()
    )
    assert "Traceback" not in result.err and result.out == ""
