"""The options the host-side commands (``validate``, ``collectives``, ``snapshot``,
``verify-node``) and the controller's ``validate-image`` share, each declared once.

Each decorator fixes an option's name, type, default and completion; a command passes
its own help where what the option means differs between commands (``--expect``'s
default, ``--junit``'s content). Every option made here is a :class:`SharedOption`
carrying its key, so ``tests/validators/test_shared_options.py`` finds each use on every
command and holds it to this declaration: a command cannot grow its own ``--shape``.

``--json`` is ``imagectl.core.output.json_option``, shared with every controller command.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from imagectl.core.errors import UserError
from imagectl.core.output import F
from imagectl.validators.commands.controller import complete

PROFILES = ("boot", "quick", "full", "burn")  # validators.checks.base.ALL_PROFILES, in order
LOADED_PROFILES = PROFILES[1:]  # the ones that put load on the GPUs (collectives' sweep)
DEVICES = ("auto", "cuda", "cpu")
TOOLKIT_OPTION = "--toolkit-wheelhouse"
SHAPE_HELP = "The machine shape (images/catalog/shapes.yaml)."

FILE = click.Path(dir_okay=False, path_type=Path)
FILE_OR_STDIN = click.Path(dir_okay=False, allow_dash=True, path_type=Path)
FOLDER = click.Path(file_okay=False, path_type=Path)

_ARGS = "imagectl.validators.commands.args"


class SharedOption(click.Option):
    """A click option declared in this module; ``key`` names the declaration."""

    key = ""


def _shared(key: str, *decls: str, **attrs: object) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        marked = click.option(*decls, cls=SharedOption, **attrs)(func)
        params: list[click.Parameter] = vars(marked)["__click_params__"]  # click's own list
        made = params[-1]
        assert isinstance(made, SharedOption)
        made.key = key
        return marked

    return decorate


def profile_option(
    help: str, *, default: str | None = None, loaded_only: bool = False
) -> Callable[[F], F]:
    """``--profile``: one of the validator's profiles (the loaded ones with ``loaded_only``)."""
    choices = LOADED_PROFILES if loaded_only else PROFILES
    return _shared(
        "profile", "--profile", type=click.Choice(choices), default=default,
        show_default=default is not None, help=help,
    )  # fmt: skip


def shape_option(help: str = SHAPE_HELP) -> Callable[[F], F]:
    """``--shape``: a catalog shape, completed by the controller where it hands that in."""
    return _shared("shape", "--shape", shell_complete=complete("shape"), help=help)


def expect_option(default_source: str) -> Callable[[F], F]:
    """``--expect FILE|-``: expectations as JSON; ``default_source``: what is read without it."""
    return _shared(
        "expect", "--expect", "expect_file", type=FILE_OR_STDIN,
        help=f"Expectations from a JSON file, - for standard input (default: {default_source}).",
    )  # fmt: skip


def device_option(help: str | None = None) -> Callable[[F], F]:
    """``--device auto|cuda|cpu``: where the GPU work runs."""
    return _shared(
        "device", "--device", type=click.Choice(DEVICES), default="auto", show_default=True,
        help=help,
    )  # fmt: skip


def _hostfile(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not Path(value).is_file():
        raise UserError(f"cannot read the --nodes hostfile {value}: no such file")
    return value


def hostfile_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """``--nodes FILE``: the multi-node hostfile (one host a line, the rendezvous first);
    a missing file is exit 2 before the command runs."""
    return _shared(
        "hostfile", "--nodes", type=click.Path(dir_okay=False), required=required,
        callback=_hostfile, help=help,
    )  # fmt: skip


def history_option(help: str) -> Callable[[F], F]:
    """``--history DIR``: the folder of previous boots' receipts."""
    return _shared("history", "--history", "history_dir", type=FOLDER, help=help)


def hygiene_root_option(help: str | None = None) -> Callable[[F], F]:
    """``--hygiene-root DIR``: the file tree the image-hygiene checks read."""
    return _shared(
        "hygiene_root", "--hygiene-root", default="/", show_default=True,
        type=click.Path(file_okay=False), help=help,
    )  # fmt: skip


def image_id_option(help: str) -> Callable[[F], F]:
    """``--image-id``: the image this host runs, where the command cannot read it itself."""
    return _shared("image_id", "--image-id", help=help)


def output_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """``-o/--output FILE``: where the command writes its document (JSON)."""
    return _shared("output", "-o", "--output", type=FILE, required=required, help=help)


def junit_option(help: str) -> Callable[[F], F]:
    """``--junit FILE``: JUnit XML for CI."""
    return _shared("junit", "--junit", type=FILE, help=help)


def sandbox_option(help: str) -> Callable[[F], F]:
    """``--sandbox``: a try-it run on replayed snapshots, which the gate accepts and records."""
    return _shared("sandbox", "--sandbox", is_flag=True, help=help)


def toolkit_wheelhouse_option(help: str) -> Callable[[F], F]:
    """``--toolkit-wheelhouse FILE``: run the command again under a venv of the GPU toolkit
    (:func:`rerun_under_toolkit`); the command's class must be :class:`KeepsArgs`."""
    return _shared("toolkit_wheelhouse", TOOLKIT_OPTION, "toolkit_wheelhouse", type=FILE, help=help)


class KeepsArgs(click.Command):
    """Keeps the command's own arguments (``ctx.meta``) so that ``--toolkit-wheelhouse``
    can run the same command line again under the toolkit venv's interpreter."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS] = list(args)
        return super().parse_args(ctx, args)


def _without_toolkit(args: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == TOOLKIT_OPTION:
            skip = True
        elif not arg.startswith(TOOLKIT_OPTION + "="):
            out.append(arg)
    return out


def rerun_under_toolkit(ctx: click.Context, wheelhouse: Path) -> int:
    """The same command line, less ``--toolkit-wheelhouse``, under the toolkit venv made
    from ``wheelhouse`` (``imagectl.validators.toolkit_venv``); the child's exit code."""
    from imagectl.validators.toolkit_venv import run_with_toolkit

    root = (ctx.find_root().obj or {}).get("root")
    again = _without_toolkit(ctx.meta[_ARGS])
    name = ctx.command.name or ""
    return run_with_toolkit(wheelhouse, [*(["--root", root] if root else []), name, *again])
