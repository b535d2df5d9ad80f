"""Shared pieces of every sub-command: options, errors and exit codes (output and JSON:
``imagectl.core.output``, shared with the validator's host-side commands)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from imagectl.cli.completion import complete_stacks
from imagectl.core.errors import EXIT_BAD_INPUT, UserError
from imagectl.core.numbers import Bounded
from imagectl.core.output import console
from imagectl.core.output import crash_traces as crash_traces  # the commands' import path
from imagectl.core.output import emit_json as emit_json
from imagectl.core.output import json_option as json_option
from imagectl.core.sitetrust import refused as site_refused
from imagectl.embedded import FAULTS

if TYPE_CHECKING:  # the registry module stays light: --help imports nothing more
    from imagectl.paths import Workspace

F = TypeVar("F", bound=Callable[..., Any])


def stack_option(
    help: str,
    *,
    dest: str = "stack",
    required: bool = False,
    multiple: bool = False,
    default: str | None = None,
) -> Callable[[F], F]:
    """``--stack NAME``: the one declaration every command uses (a name checked by
    ``stack_name``, exit 2 for a path or a bad name)."""
    kwargs: dict[str, Any] = {
        "callback": stack_name,
        "required": required,
        "help": help,
        "shell_complete": complete_stacks,
    }
    if multiple:
        kwargs["multiple"] = True
    if default is not None:
        kwargs.update(default=default, show_default=True)
    return click.option("--stack", dest, **kwargs)


def cloud_option(
    help: str,
    *,
    dest: str = "cloud",
    required: bool = False,
    multiple: bool = False,
    remote_only: bool = False,
) -> Callable[[F], F]:
    """``--cloud NAME``: one of the registered clouds (``imagectl.clouds.registry``; only
    the real ones with ``remote_only``), exit 2 naming the bad value otherwise. The
    registry is read when a command's module is imported, never for ``imagectl --help``."""
    from imagectl.clouds.registry import cloud_names, remote_cloud_names

    choices = remote_cloud_names() if remote_only else cloud_names()
    return click.option(
        "--cloud", dest, type=click.Choice(choices), required=required, multiple=multiple,
        help=help,
    )  # fmt: skip


def accel_option(help: str) -> Callable[[F], F]:
    """``--accel auto|kvm|tcg`` (``$IMAGECTL_LOCAL_ACCEL``): the local cloud's QEMU."""
    return click.option(
        "--accel", type=click.Choice(["auto", "kvm", "tcg"]), default="auto",
        envvar="IMAGECTL_LOCAL_ACCEL", show_default=True, help=help,
    )  # fmt: skip


def inject_fault_option(help: str) -> Callable[[F], F]:
    """``--inject-fault NAME``: one of the local build's demonstration faults."""
    return click.option("--inject-fault", type=click.Choice(FAULTS), default=None, help=help)


def wait_option(func: F) -> F:
    """``--wait S``: how long to wait for a concurrent promotion of the same stack."""
    return click.option(
        "--wait",
        "wait_s",
        type=Bounded(0, 86400, unit="seconds"),
        default=0.0,
        show_default=True,
        help="Seconds to wait for a concurrent promotion of the stack.",
    )(func)


def hosts_option(help: str) -> Callable[[F], F]:
    """``--hosts N`` (1 to 64, default 1): validation instances of a shape, as
    ``validate-image`` launches them and ``doctor`` checks quota and capacity for them."""
    return click.option(
        "--hosts", type=click.IntRange(1, 64), default=1, show_default=True, help=help
    )


def runner_cidr_option(help: str) -> Callable[[F], F]:
    """``--runner-cidr`` (``$IMAGECTL_RUNNER_CIDR``): the runner's address, the one source
    a validation host's SSH admits."""
    return click.option("--runner-cidr", envvar="IMAGECTL_RUNNER_CIDR", help=help)


def stack_name(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback for ``--stack``: a stack name (a file name in images/stacks/ without
    .yaml), never a path; exit 2 otherwise, before anything else runs."""
    from imagectl.stacks.schema import STACK_NAME

    for name in value if isinstance(value, tuple) else (value,):
        if name is not None and not STACK_NAME.match(name):
            raise UserError(
                f"--stack '{name[:80]}' is not a stack name: 2-40 lowercase letters, digits "
                "and '-' (a file name in images/stacks/ without .yaml, not a path)",
                hint="`imagectl lint` lists the stacks",
            )
    return value


def workspace(ctx: click.Context) -> Workspace:
    from imagectl.paths import find_workspace

    root = (ctx.find_root().obj or {}).get("root")
    return find_workspace(root)


def _print_error(message: str) -> None:
    from imagectl.core.commandtext import say

    # may quote what a host or an operator wrote (say prints it inert); the commands it
    # names stay whole at every width
    say(console(stderr=True), message, prefix="error: ", prefix_style="bold red")


def fail(message: str, *, code: int = EXIT_BAD_INPUT) -> None:
    _print_error(message)
    sys.exit(code)


def _check_site() -> None:
    """A ``.pth`` file of this venv, or a folder it adds, that others can change is exit 2
    (``imagectl.core.sitetrust``): every module there runs as imagectl's own."""
    why = site_refused()
    if why is not None:
        raise UserError(
            f"{why}. Every module in it would run as imagectl's own (as root on a node), "
            "so no command was run",
            hint="Fix the path as said, or reinstall without --host-site-packages",
        )


def run_cli(group: click.Group, argv: list[str]) -> int:
    """Run the click group; turn UserError into one paragraph on stderr and exit 2."""
    import logging

    # azure.identity logs each credential it tried as a multi-line warning; the failure
    # itself reaches the user as one paragraph (imagectl.clouds.sdk_errors).
    logging.getLogger("azure.identity").setLevel(logging.ERROR)
    try:
        _check_site()  # before any command imports from a folder a .pth adds
        rv = group.main(args=argv, prog_name="imagectl", standalone_mode=False)
    except UserError as exc:
        _print_error(exc.render())
        return exc.exit_code
    except click.exceptions.Abort:
        console(stderr=True).print("[yellow]aborted[/]")
        return 130
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT if exc.exit_code in (1, 2) else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        console(stderr=True).print("[yellow]interrupted[/]")
        return 130
    except ModuleNotFoundError as exc:
        missing = controller_extra_missing(exc)
        if missing is None:
            raise
        _print_error(missing.render())
        return missing.exit_code
    except Exception as exc:  # a cloud SDK's "no credentials" / "unreachable": exit 2
        from imagectl.clouds.sdk_errors import translate

        translated = translate(exc)
        if translated is None:
            raise
        _print_error(translated.render())
        return translated.exit_code
    return int(rv or 0)


# Top-level modules of the "controller" extra (pyproject.toml): a validator-only install
# (a GPU host, the image's /opt/imagectl) lacks them.
CONTROLLER_MODULES = {"sqlalchemy": "SQLAlchemy", "alembic": "alembic"}


def controller_extra_missing(exc: ModuleNotFoundError) -> UserError | None:
    """A controller command run on a validator-only install: one paragraph, exit 2."""
    top = (exc.name or "").split(".")[0]
    if top not in CONTROLLER_MODULES:
        return None
    return UserError(
        f"this command runs on the controller and needs {CONTROLLER_MODULES[top]}, which "
        "this install lacks: it has the validator alone (`imagectl validate` and "
        "`imagectl snapshot -o FILE` work here)",
        hint="Install the controller with pip install 'imagectl[controller]' (or "
        "'imagectl[all]' for the cloud SDKs too)",
    )


def entrypoint() -> None:
    from imagectl.cli import main

    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
