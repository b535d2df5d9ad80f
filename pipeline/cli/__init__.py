"""The ``imagectl`` command line.

Sub-commands are registered by name in ``COMMANDS`` and imported only when invoked, so
``imagectl --help`` never loads a cloud SDK, torch or SQLAlchemy. Each module named here
defines a click command called ``command``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from imagectl import __version__

# name -> (module, one-line help). The help line is shown by `imagectl --help` without
# importing the module.
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
    "deprecate": ("imagectl.cli.deprecate", "Deprecate an image, or apply a stack's retention."),
    "block": ("imagectl.cli.block", "Block an image from promotion (revoke it once attested)."),
    "revoke": (
        "imagectl.cli.revoke",
        "Publish a signed revocation of an image (rolled back first when promoted).",
    ),
    "validate": ("imagectl.cli.validate", "Validate this GPU host (or a snapshot): health, XIDs."),
    "collectives": (
        "imagectl.cli.collectives",
        "This node's part of a collective run across nodes (validate-image --nodes).",
    ),
    "receipt": ("imagectl.cli.receipt", "Show or compare validation receipts."),
    "validate-image": (
        "imagectl.cli.validate_image",
        "Boot a candidate on its GPU shape, validate, decide.",
    ),
    "diff": ("imagectl.cli.diff", "What changed between two images (SBOMs), pins first."),
    "attest": ("imagectl.cli.attest", "Sign a validated image's attestation (again)."),
    "verify": ("imagectl.cli.verify", "Check an image's signed validation attestation."),
    "verify-node": (
        "imagectl.cli.verify_node",
        "On a fleet node: refuse unless the booted image is attested.",
    ),
    "reap": ("imagectl.cli.reap", "Terminate expired imagectl instances and placements."),
    "doctor": ("imagectl.cli.doctor", "Check an account before a run: permissions, quota, ..."),
    "bundle": (
        "imagectl.cli.bundle",
        "Make an offline validator bundle for a host you already run.",
    ),
    "snapshot": ("imagectl.cli.snapshot", "Capture what the validator reads, for offline replay."),
    "drift": ("imagectl.cli.drift", "Report upstream, replica, fleet and host drift per stack."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        cmd: click.Command = module.command
        return cmd

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
    help="Workspace holding images/ and playbooks/ (default: found from the current folder).",
)
@click.pass_context
def cli(ctx: click.Context, root: str | None) -> None:
    """imagectl: pin, build, validate, promote and watch GPU machine images.

    Exit codes: 0 ok, 1 a check failed / drift found / image blocked, 2 bad input.
    """
    ctx.obj = {"root": root}


def main(argv: list[str] | None = None) -> Any:
    from imagectl.cli.common import run_cli

    return run_cli(cli, argv if argv is not None else sys.argv[1:])
