"""The ``imagectl`` command line.

Sub-commands are registered by name in ``COMMANDS`` and imported only when invoked, so
``imagectl --help`` never loads a cloud SDK, torch or SQLAlchemy. Each module named here
defines a click command called ``command``.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

import click

from imagectl import __version__

if TYPE_CHECKING:
    from imagectl.validators.commands.controller import ControllerHooks

# name -> (module, one-line help). The help line is shown by `imagectl --help` without
# importing the module. The host-side commands (validate, snapshot, collectives,
# verify-node) live with the validator (imagectl.validators.commands).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("imagectl.cli.run", "The whole pipeline on this machine in QEMU, no cloud."),
    "lint": ("imagectl.cli.lint", "Check every stack: schema, compatibility, template variables."),
    "compat": ("imagectl.cli.compat", "Check an ad-hoc driver/CUDA/NCCL/GPU combination."),
    "plan": ("imagectl.cli.plan", "Print the build matrix and write resolved Packer variables."),
    "build": (
        "imagectl.cli.build",
        "Build a candidate image of a stack for one cloud with Packer.",
    ),
    "status": ("imagectl.cli.status", "Show current, candidate and blocked images per stack."),
    "promote": ("imagectl.cli.promote", "Promote a validated image to every region (gated)."),
    "rollback": ("imagectl.cli.rollback", "Move latest pointers back to the previous image."),
    "rollout": (
        "imagectl.cli.rollout",
        "Advance, hold or roll back a stack's canary from fleet health (Prometheus).",
    ),
    "deprecate": ("imagectl.cli.deprecate", "Deprecate an image, or apply a stack's retention."),
    "block": ("imagectl.cli.block", "Block an image from promotion (revoke it once attested)."),
    "revoke": (
        "imagectl.cli.revoke",
        "Publish a signed revocation of an image (rolled back first when promoted).",
    ),
    "validate": (
        "imagectl.validators.commands.validate",
        "Validate this GPU host (or a snapshot): health, XIDs.",
    ),
    "collectives": (
        "imagectl.validators.commands.collectives",
        "This node's part of a collective run across nodes (validate-image --nodes).",
    ),
    "receipt": ("imagectl.cli.receipt", "Show or compare validation receipts."),
    "validate-image": (
        "imagectl.cli.validate_image",
        "Boot a candidate on its GPU shape, validate, decide.",
    ),
    "diff": ("imagectl.cli.diff", "What changed between two images (SBOMs), pins first."),
    "scan": (
        "imagectl.cli.scan",
        "Judge a Grype report on a candidate's SBOM by the stack's vulnerability threshold.",
    ),
    "attest": ("imagectl.cli.attest", "Sign a validated image's attestation (again)."),
    "verify": ("imagectl.cli.verify", "Check an image's signed validation attestation."),
    "verify-node": (
        "imagectl.validators.commands.verify_node",
        "On a fleet node: refuse unless the booted image is attested.",
    ),
    "reap": ("imagectl.cli.reap", "Terminate expired imagectl instances and placements."),
    "doctor": ("imagectl.cli.doctor", "Check an account before a run: permissions, quota, ..."),
    "bundle": (
        "imagectl.cli.bundle",
        "Make an offline validator bundle for a host you already run.",
    ),
    "snapshot": (
        "imagectl.validators.commands.snapshot",
        "Capture what the validator reads, for offline replay.",
    ),
    "drift": ("imagectl.cli.drift", "Report upstream, replica, fleet and host drift per stack."),
    "watch": ("imagectl.cli.watch", "On a fleet node: passive health (Xid, clocks, ECC)."),
}


# The top-level options that take a value. Typed after the command (`imagectl lint --root
# DIR`), they are moved in front of it: a global option works in either position.
GLOBAL_VALUE_OPTIONS = ("--root",)


def hoist_global_options(args: list[str], value_options: frozenset[str] = frozenset()) -> list[str]:
    """``[cmd, ..., --root, DIR, ...]`` -> ``[--root, DIR, cmd, ...]`` (also ``--root=DIR``);
    nothing after a ``--`` moves, the value of a command's own option (``value_options``:
    ``--reason --root`` keeps ``--root`` as the reason) stays, and a value-less ``--root``
    at the end stays for click to refuse."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if arg in value_options and i + 1 < len(args):
            rest.extend(args[i : i + 2])  # an option of the command, and its value
            i += 2
            continue
        if name in GLOBAL_VALUE_OPTIONS and rest:
            if "=" in arg:
                front.append(arg)
            elif i + 1 < len(args):
                front.extend(args[i : i + 2])
                i += 1
            else:
                rest.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


class LazyGroup(click.Group):
    @property
    def validator_hooks(self) -> ControllerHooks:
        """What the validator's host-side commands ask of the controller (the workspace,
        a stack's expectations, completion): handed in, never imported by them."""
        from imagectl.cli.hostside import HOOKS

        return HOOKS

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = hoist_global_options(args, self._value_options(ctx, args))
        return super().parse_args(ctx, args)

    def _value_options(self, ctx: click.Context, args: list[str]) -> frozenset[str]:
        """The options that take a value on the command (and sub-command) ``args`` name."""
        names: set[str] = set(GLOBAL_VALUE_OPTIONS)
        cmd: click.Command | None = self
        i = 0
        while isinstance(cmd, click.Group) and i < len(args) and args[i] != "--":
            token = args[i]
            if token.startswith("-"):
                i += 2 if token in names else 1
                continue
            try:
                cmd = cmd.get_command(ctx, token)
            except Exception:  # a command that cannot load is click's to report
                break
            for param in cmd.params if cmd is not None else ():
                if isinstance(param, click.Option) and not param.is_flag and not param.count:
                    names.update(param.opts)
            i += 1
        return frozenset(names - set(GLOBAL_VALUE_OPTIONS))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        cmd: click.Command = module.command
        from imagectl.cli.deadline import with_deadline
        from imagectl.cli.helptext import with_help

        with_help(cmd_name, cmd)  # its exit codes, and commands kept whole in its --help

        return with_deadline(cmd_name, cmd)  # reap, drift, doctor, promote, validate-image

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="imagectl")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    envvar="IMAGECTL_ROOT",
    help="Workspace holding images/ and playbooks/ (default: found from the current folder). "
    "Before or after the command.",
)
@click.pass_context
def cli(ctx: click.Context, root: str | None) -> None:
    """imagectl: pin, build, validate, promote and watch GPU machine images.

    Exit codes: 0 ok, 1 a check failed / drift found / image blocked / past its
    --deadline, 2 bad input or configuration, 3 rollout held (too little data, or
    Prometheus unavailable), 130 interrupted. Each command's --help says what its own
    mean.
    """
    ctx.obj = {"root": root}


def main(argv: list[str] | None = None) -> int:
    from imagectl.cli.common import run_cli

    return run_cli(cli, argv if argv is not None else sys.argv[1:])
