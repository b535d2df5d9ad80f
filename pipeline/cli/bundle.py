"""``imagectl bundle``: one tarball that installs the validator on a host with no network."""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.cli.common import console, emit_json, json_option, workspace
from imagectl.core.commandtext import command_line


@click.command("bundle")
@click.option(
    "--python",
    "python",
    required=True,
    help="The host's Python as X.Y (its `python3 --version`), e.g. 3.12.",
)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    help="A wheel platform tag the host accepts (repeatable; default: the images' "
    "manylinux x86_64 tags).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the bundle (a .tar.gz).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context, python: str, platforms: tuple[str, ...], output: Path, as_json: bool
) -> int:
    """Make a self-contained validator bundle: imagectl's wheel and every locked dependency
    (hashed) for one Python and platform, with an offline install script.

    On the host (its own torch is used; the bundle carries none):

    \b
      tar xf FILE && sh imagectl-bundle-*/install.sh --prefix DIR --host-site-packages

    The package index comes from pip's own settings (PIP_INDEX_URL), never from argv.
    """
    from imagectl.supply.bundle import make_bundle

    made = make_bundle(workspace(ctx), python=python, out=output, platforms=platforms)
    install = (
        f"tar xf {made.path.name} && sh {made.folder}/install.sh --prefix /opt/imagectl-validator "
        "--host-site-packages"
    )
    if as_json:
        emit_json(
            {
                "path": str(made.path),
                "sha256": made.sha256,
                "bytes": made.size,
                "python": made.python,
                "platforms": list(made.platforms),
                "files": made.files,
                "install": install,
            }
        )
        return 0
    out = console()
    out.print(f"bundle: {made.path} ({made.size / 1e6:.1f} MB, {len(made.files)} files)")
    out.print(f"sha256: {made.sha256}")
    out.print(f"for:    Python {made.python} on {', '.join(made.platforms)}")
    command_line(out, "install on the host (no network needed):", install)
    return 0
