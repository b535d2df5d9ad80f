"""imagectl compat check | rules"""

from __future__ import annotations

import datetime as dt
import re
import sys

import click

from imagectl.cli.common import console, emit_json, json_option, workspace
from imagectl.cli.completion import complete_gpus
from imagectl.core.errors import EXIT_FAILED, EXIT_OK, UserError
from imagectl.core.versions import NcclVersion
from imagectl.validators.commands.options import profile_option


@click.group("compat")
def command() -> None:
    """Check driver / CUDA / NCCL / fabric manager / GPU combinations."""


@command.command("check")
@click.option("--driver", required=True, help="Driver version, e.g. 580.95.05.")
@click.option("--cuda", required=True, help="CUDA toolkit version, e.g. 12.8 or 12.8.1.")
@click.option("--nccl", help="NCCL package version, e.g. 2.26.2-1+cuda12.8.")
@click.option("--fabric-manager", help="Fabric manager version (must equal the driver).")
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    shell_complete=complete_gpus,
    help="GPU (repeatable): a SKU (H100-SXM-80GB), its nvidia-smi name (NVIDIA H100 80GB "
    "HBM3) or NVIDIA's product name (H100 SXM; H100 judges every H100 SKU).",
)
@click.option("--kernel-modules", type=click.Choice(["open", "proprietary"]))
@click.option(
    "--toolkit",
    help="The validator's GPU toolkit as TORCH+cuXY, e.g. 2.9.1+cu128 (validation.toolkit).",
)
@profile_option("The validation profile (quick/full/burn on GPUs need a toolkit).")
@click.option(
    "--azure-security-type",
    type=click.Choice(["Standard", "TrustedLaunchSupported", "TrustedLaunch"]),
    help="The Azure image definition's security type (clouds.azure.gallery.security_type).",
)
@click.option(
    "--as-of",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Judge branch lifecycles as of this date (default: today).",
)
@json_option
@click.pass_context
def check(
    ctx: click.Context,
    driver: str,
    cuda: str,
    nccl: str | None,
    fabric_manager: str | None,
    gpus: tuple[str, ...],
    kernel_modules: str | None,
    toolkit: str | None,
    profile: str | None,
    azure_security_type: str | None,
    as_of: dt.datetime | None,
    as_json: bool,
) -> None:
    """Exit 0 when the combination is valid, 1 when a rule is violated, 2 on bad input."""
    from imagectl.compat.data import load_compat
    from imagectl.compat.engine import Combination, evaluate

    data = load_compat(workspace(ctx).compat_dir)
    if nccl:
        NcclVersion.parse(nccl)
    named = {g: [x.sku for x in data.gpus_named(g)] for g in gpus}
    canonical = tuple(dict.fromkeys(s for skus in named.values() for s in skus))
    toolkit_torch, toolkit_cuda = _parse_toolkit(toolkit)
    combo = Combination(
        driver=driver,
        cuda=cuda,
        nccl=nccl,
        fabric_manager=fabric_manager,
        gpus=canonical,
        kernel_modules=kernel_modules,
        toolkit_torch=toolkit_torch,
        toolkit_cuda=toolkit_cuda,
        profile=profile,
        azure_security_type=azure_security_type,
        as_of=as_of.date() if as_of else dt.date.today(),
    )
    violations = evaluate(combo, data)
    errors = [v for v in violations if v.is_error]
    if as_json:
        emit_json(
            {
                "valid": not errors,
                "combination": {
                    "driver": driver,
                    "cuda": cuda,
                    "nccl": nccl,
                    "fabric_manager": fabric_manager,
                    "gpus": list(canonical),
                    "gpu_names": named,
                    "kernel_modules": kernel_modules,
                    "toolkit": toolkit,
                    "profile": profile,
                    "azure_security_type": azure_security_type,
                    "as_of": combo.as_of.isoformat(),
                },
                "violations": [v.as_dict() for v in violations],
            }
        )
    else:
        out = console()
        for name, skus in named.items():
            if [name] != skus:
                out.print(f"GPU {name!r}: judged as {', '.join(skus)}", markup=False)
        for v in violations:
            colour = "red" if v.is_error else "yellow"
            out.print(f"[{colour}]{v.severity}[/] [bold]{v.rule}[/]: ", end="")
            out.print(v.message, markup=False)
            out.print(f"   fix: {v.fix}", markup=False)
            out.print(f"   source: {v.source}", markup=False, style="dim")
        if errors:
            out.print(f"[red]invalid[/]: {len(errors)} rule(s) violated")
        else:
            out.print(
                "[green]valid[/]" + (f" with {len(violations)} warning(s)" if violations else "")
            )
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


@command.command("rules")
@json_option
@click.pass_context
def rules(ctx: click.Context, as_json: bool) -> None:
    """List every compatibility rule with its source."""
    from imagectl.compat.data import load_compat

    data = load_compat(workspace(ctx).compat_dir)
    if as_json:
        emit_json([vars(r) for r in data.rules.values()])
        return
    from rich.table import Table

    table = Table("id", "severity", "checks", "source")
    for r in data.rules.values():
        table.add_row(r.id, r.severity, r.message, r.source)
    console().print(table)


def _parse_toolkit(text: str | None) -> tuple[str | None, str | None]:
    """'2.9.1+cu128' -> ('2.9.1', '12.8'); bad input is exit 2."""

    if not text:
        return None, None
    m = re.fullmatch(r"(\d+\.\d+\.\d+)\+cu(\d{2})(\d)", text)
    if not m:
        raise UserError(
            f"cannot parse toolkit '{text}'",
            hint="Give the torch release and its CUDA variant, e.g. 2.9.1+cu128",
        )
    return m.group(1), f"{m.group(2)}.{m.group(3)}"
