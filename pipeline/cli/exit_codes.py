"""What each command's exit status means, shown at the end of its ``--help`` (the registry
adds it as the command's epilog: ``imagectl.cli.LazyGroup.get_command``).

Every command: 0 done, 2 bad input or configuration (one paragraph on stderr), 130
interrupted (Ctrl-C). What 1 (and rollout's 3) means is each command's own, below.
A command past its ``--deadline`` exits 1 naming the call it waited on.
"""

from __future__ import annotations

import click

COMMON = "2 bad input or configuration, 130 interrupted"

# command -> what its 0, 1 (and other) exits mean; the common ones are appended
EXITS: dict[str, str] = {
    "attest": "0 signed (or the key made, with --new-key)",
    "block": "0 blocked (revoked where attested), 1 another promotion holds the lock",
    "build": "0 built, 1 the build failed (Packer, provisioning or a stage's check)",
    "bundle": "0 bundle written",
    "collectives": "0 every collective passed, 1 one failed",
    "compat check": "0 the combination is valid, 1 a rule is violated",
    "compat rules": "0 listed",
    "deprecate": "0 done, 1 another promotion holds the lock or a cloud refused",
    "diff": "0 compared",
    "doctor": "0 nothing blocks, 1 a blocker was found",
    "drift": "0 no drift and every check ran, 1 drift found or a check could not run",
    "lint": "0 every stack passes, 1 a stack breaks a rule",
    "plan": "0 planned, 2 also when a cloud could not be asked for a base image",
    "promote": "0 promoted, 1 the gate refused, a region failed (resume command printed), "
    "the image is blocked, or another promotion holds the lock",
    "reap": "0 everything expired was terminated or deleted, 1 a termination, deletion or "
    "listing failed",
    "receipt show": "0 shown, 1 the receipt's verdict is fail",
    "receipt diff": "0 nothing changed, 1 something changed",
    "revoke": "0 revoked, 1 the rollback first failed or another promotion holds the lock",
    "rollback": "0 rolled back, 1 another promotion holds the lock or a cloud call failed",
    "rollout": "0 advance (the candidate promoted to latest), 1 roll back (canary back, "
    "candidate blocked), 3 hold (too little data, or Prometheus unavailable; nothing changed)",
    "run": "0 the candidate was promoted, 1 a stage failed or validation blocked it",
    "scan": "0 nothing at or above the stack's threshold, 1 a finding blocks the candidate",
    "snapshot": "0 snapshot written",
    "status": "0 shown",
    "validate": "0 every check passes, 1 a check fails",
    "validate-image": "0 validated, 1 not validated (a check failed, no capacity, a host "
    "unreachable) or an instance could not be terminated",
    "verify": "0 valid, 1 not valid or revoked",
    "verify-node": "0 this node's image is attested, 1 it is not (the node must not serve)",
    "watch": "0 looked, 1 with --once: the kernel log or NVML could not be read",
}


GROUP = "Exit codes: as each sub-command's --help says; " + COMMON + "."


def epilog(name: str) -> str:
    return f"Exit codes: {EXITS[name]}; {COMMON}."


def with_exit_codes(name: str, cmd: click.Command) -> click.Command:
    """``cmd`` (and a group's sub-commands) with its exit codes as the ``--help`` epilog."""
    if isinstance(cmd, click.Group):
        cmd.epilog = cmd.epilog or GROUP
        for sub, child in cmd.commands.items():
            child.epilog = child.epilog or epilog(f"{name} {sub}")
    else:
        cmd.epilog = cmd.epilog or epilog(name)
    return cmd
