"""``imagectl scan --stack S REPORT``: judge Grype's JSON report on a candidate's SBOM
against the stack's vulnerability threshold (``validation.vulnerabilities``, or the
sourced default in images/compat/vulnerabilities.yaml).

The build workflow's scan step runs ``grype sbom:FILE -o json`` and then this; its exit
status is the step's, so a finding at or above the stack's threshold fails the build job
before validation and the candidate never reaches promotion. Exit 0 nothing blocks, 1 a
finding blocks, 2 the report or the stack is not valid."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from imagectl.cli.common import emit_json, json_option, stack_option, workspace
from imagectl.core.errors import EXIT_FAILED, UserError


@click.command("scan")
@click.argument("report", type=click.Path(dir_okay=False, path_type=Path))
@stack_option("The stack whose threshold judges the report.", required=True)
@json_option
@click.pass_context
def command(ctx: click.Context, report: Path, stack: str, as_json: bool) -> None:
    """Judge a Grype JSON report (grype sbom:FILE -o json) by the stack's threshold."""
    from imagectl.core.safetext import one_line
    from imagectl.provenance.vulnerabilities import judge, read_report, severities, threshold_for
    from imagectl.stacks.loader import find_stack, load_stack

    ws = workspace(ctx)
    stack_path = find_stack(ws.images / "stacks", stack)
    threshold = threshold_for(load_stack(stack_path).stack, stack_path, ws.compat_dir)
    order = severities(ws.compat_dir)
    try:
        data = report.read_bytes()
    except OSError as exc:
        raise UserError(
            f"cannot read the Grype report {report}: {exc.strerror}",
            hint="Write it with grype sbom:FILE -o json > REPORT",
        ) from exc
    verdict = judge(read_report(data, where=str(report), order=order), threshold, order)
    rule = f"{threshold.fail_on} or above" + (" with a fix" if threshold.only_fixed else "")
    if as_json:
        emit_json(
            {
                "stack": stack,
                "fail_on": threshold.fail_on,
                "only_fixed": threshold.only_fixed,
                "threshold_from": threshold.origin,
                "matches": verdict.counted,
                "blocking": [
                    {
                        "vulnerability": m.vulnerability,
                        "severity": m.severity,
                        "package": m.package,
                        "version": m.version,
                        "fixed_in": list(m.fix_versions),
                    }
                    for m in verdict.blocking
                ],
            }
        )
    else:
        click.echo(
            f"{stack}: {verdict.counted} match(es); blocks on {rule} "
            f"(threshold from {threshold.origin})"
        )
        for m in verdict.blocking:
            fixed = f", fixed in {one_line(', '.join(m.fix_versions))}" if m.fix_versions else ""
            click.echo(
                f"  {m.severity}: {one_line(m.vulnerability)} in "
                f"{one_line(m.package)} {one_line(m.version)}{fixed}"
            )
        click.echo(
            f"blocked: {len(verdict.blocking)} finding(s) at {rule}"
            if verdict.blocking
            else f"passes: nothing at {rule}"
        )
    if not verdict.ok:
        sys.exit(EXIT_FAILED)
