"""The doctor's checks that make no cloud call: placeholder ids and the runner's address.
``build`` and ``validate-image`` run these first (``preflight``)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding, blockers
from imagectl.stacks import ResolvedStack
from imagectl.stacks.placeholders import placeholder_findings

MY_ADDRESS = "curl -fsS https://checkip.amazonaws.com"
# Addresses no cloud instance can reach the runner at: private (RFC 1918, RFC 4193),
# shared address space behind carrier NAT (RFC 6598), loopback and link-local (RFC 1122,
# RFC 3927, RFC 4291). Documentation ranges (RFC 5737) are left alone: examples use them.
UNREACHABLE = tuple(
    ipaddress.ip_network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "fc00::/7",
        "::1/128",
        "fe80::/10",
    )
)


def placeholder_what(message: str) -> str:
    """``'<value>' is <what>`` of a PLACEHOLDER finding's message, the value whole (an ARN's
    own colons included)."""
    match = re.match(r"^('.*' is .*?)(?:, not an id of yours|: this stack is an example)", message)
    return match[1] if match else message


def placeholders(
    resolved: ResolvedStack, compat_dir: Path, cloud: str, *, strict: bool
) -> list[Finding]:
    """Documentation ids in the cloud's settings: blockers (the cloud would refuse them after
    a build was paid for), or, unless ``strict``, warnings in a stack that says it is an
    example (``example: true``, as ``imagectl lint`` judges it)."""
    found = []
    for f in placeholder_findings(resolved.stack, compat_dir):
        if tuple(f.loc[:2]) != ("clouds", cloud):
            continue
        field = ".".join(str(p) for p in f.loc)
        status = BLOCKER if (strict or not resolved.stack.example) else WARNING
        what = placeholder_what(f.message)
        found.append(Finding("placeholder", status, f"{field}: {what}", f.fix.split(";")[0]))
    return found


def _within(
    net: ipaddress.IPv4Network | ipaddress.IPv6Network,
    other: ipaddress.IPv4Network | ipaddress.IPv6Network,
) -> bool:
    if isinstance(net, ipaddress.IPv4Network) and isinstance(other, ipaddress.IPv4Network):
        return net.subnet_of(other)
    if isinstance(net, ipaddress.IPv6Network) and isinstance(other, ipaddress.IPv6Network):
        return net.subnet_of(other)
    return False


def runner(cidr: str | None, *, required: bool, real: bool = True) -> list[Finding]:
    """The runner's address, which the validation hosts admit SSH from (and nothing else)."""
    if not cidr:
        if not required:
            return []
        return [
            Finding(
                "runner",
                BLOCKER,
                "no runner address: the validation hosts would admit SSH from nobody",
                f"pass --runner-cidr $({MY_ADDRESS})/32 (or set IMAGECTL_RUNNER_CIDR)",
            )
        ]
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return [
            Finding(
                "runner",
                BLOCKER,
                f"--runner-cidr {cidr!r} is not an address or CIDR",
                f"pass the runner's public address: $({MY_ADDRESS})/32",
            )
        ]
    if net.prefixlen == 0:
        return [
            Finding(
                "runner",
                BLOCKER,
                f"--runner-cidr {cidr} admits the whole internet",
                "pass the runner's own address as a /32",
            )
        ]
    if real and any(_within(net, n) for n in UNREACHABLE):
        return [
            Finding(
                "runner",
                BLOCKER,
                f"--runner-cidr {cidr} is not an internet address: a cloud instance "
                "can never reach it, so validation would wait for hosts it cannot reach",
                f"use the address the internet sees ($({MY_ADDRESS})), or run from a "
                "runner with a public address",
            )
        ]
    return [Finding("runner", OK, f"SSH will be admitted from {net} only")]


def preflight(
    resolved: ResolvedStack,
    compat_dir: Path,
    cloud: str,
    *,
    real: bool,
    runner_cidr: str | None = None,
    need_runner: bool = False,
) -> None:
    """The cheap part of ``imagectl doctor``, before a build or a validation: a blocker is
    exit 2 naming each finding and its fix. Placeholder ids block as ``imagectl lint``
    judges them (a stack that says it is an example only warns; ``doctor`` always blocks)."""
    found = placeholders(resolved, compat_dir, cloud, strict=False)
    found += runner(runner_cidr, required=need_runner, real=real)
    bad = blockers(found)
    if bad:
        raise UserError(
            f"{resolved.name} on {cloud} cannot run as configured (`imagectl doctor --stack "
            f"{resolved.name} --cloud {cloud}` checks the account too): "
            + "; ".join(f"{f.message} ({f.fix})" if f.fix else f.message for f in bad),
            hint="Fix the findings above, then run the command again; nothing was spent",
        )
