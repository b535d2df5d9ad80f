"""Regenerate the lock files: ``python -m imagectl.supply.lock [validator|toolkit|all]``.

- ``validator``: ``validators/requirements.lock``, imagectl's own dependencies
  (pyproject.toml ``[project].dependencies``) for every distribution Python an image can
  have (``imagectl.toolkit.DISTRO_PYTHON``), binary wheels for the image's platform.
- ``installer``: ``validators/installer.lock``, the pip the validator bundle carries to
  install itself on a host without pip (``imagectl bundle``; pure Python, one wheel).
- ``controller``: ``.ci/controller.lock``, what the GitHub workflows' cloud jobs install
  (imagectl with its ``all`` extra, and setuptools and wheel to build it without build
  isolation) for the workflows' Python (``CONTROLLER_PYTHON``) on the runner's platform.
- ``dev``: ``.ci/dev.lock``, what the test jobs (``make venv``: ci.yml, nightly.yml) and a
  developer's venv install: imagectl's ``dev`` and ``torch`` extras (the test runners,
  linters, and the CPU collectives' torch) with the build backend, for the workflows'
  Python on the runner's platform.
- ``toolkit``: ``images/compat/locks/torch-<release>-<variant>.lock`` for each
  ``validation.toolkit`` a stack pins, from that variant's index (images/compat/toolkits.yaml,
  or ``--index-url``).

The output depends only on the index's contents (pip's own configuration is ignored), so
running it twice gives the same bytes; review the diff like code and commit it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib  # type: ignore[import-not-found,unused-ignore]
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

from imagectl.compat.data import load_compat
from imagectl.core.errors import UserError
from imagectl.paths import Workspace, find_workspace
from imagectl.stacks import load_resolved, stack_paths
from imagectl.supply.lockfile import Lock, inputs_digest, load, merge
from imagectl.supply.resolve import PYPI, resolve
from imagectl.supply.targets import DISTRO_PYTHON, PLATFORMS

COMMAND = "python -m imagectl.supply.lock"
WHICH = ("validator", "installer", "controller", "dev", "toolkit", "all")
# The Python the workflows' actions/setup-python installs (.github/workflows/*.yml).
CONTROLLER_PYTHON = "3.11"
# The extra the workflows install, and the build backend pip builds imagectl with when it
# installs it without build isolation (pyproject.toml [build-system].requires).
CONTROLLER_EXTRA = "all"
# The extras the test jobs and `make venv` install: the test runners and linters (dev, which
# names all and testinfra), and torch for the CPU collectives and GEMM tests.
DEV_EXTRAS = ("dev", "torch")


@dataclass(frozen=True)
class LockSpec:
    """What one lock file is made from."""

    path: Path
    title: str
    command: str
    requirements: tuple[str, ...]
    index_url: str
    pythons: tuple[str, ...] = tuple(sorted(set(DISTRO_PYTHON.values())))
    platforms: tuple[str, ...] = PLATFORMS


def validator_lock_path(ws: Workspace | None = None) -> Path:
    return (ws or find_workspace()).root / "validators" / "requirements.lock"


def installer_lock_path(ws: Workspace | None = None) -> Path:
    return (ws or find_workspace()).root / "validators" / "installer.lock"


def controller_lock_path(ws: Workspace | None = None) -> Path:
    return (ws or find_workspace()).root / ".ci" / "controller.lock"


def dev_lock_path(ws: Workspace | None = None) -> Path:
    return (ws or find_workspace()).root / ".ci" / "dev.lock"


def toolkit_lock_path(torch: str, variant: str, ws: Workspace | None = None) -> Path:
    return (ws or find_workspace()).compat_dir / "locks" / f"torch-{torch}-{variant}.lock"


def toolkit_requirement(torch: str, variant: str) -> str:
    return f"torch=={torch}+{variant}"


def core_dependencies(pyproject: Path) -> tuple[str, ...]:
    """pyproject.toml's ``[project].dependencies``: what the image's validator needs."""
    doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return tuple(doc["project"]["dependencies"])


def extra_dependencies(pyproject: Path, extra: str) -> tuple[str, ...]:
    """The requirements ``imagectl[extra]`` adds, its own extras expanded (``all`` names
    ``imagectl[controller,postgres,...]``)."""
    doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    name = doc["project"]["name"]
    extras = doc["project"].get("optional-dependencies", {})
    out: list[str] = []
    todo, seen = [extra], set()
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        for req in extras.get(current, ()):
            head = req.split("[", 1)[0].strip()
            if head == name and "[" in req:
                todo += [e.strip() for e in req.split("[", 1)[1].split("]", 1)[0].split(",")]
            elif req not in out:
                out.append(req)
    return tuple(out)


def build_requirements(pyproject: Path) -> tuple[str, ...]:
    doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return tuple(doc["build-system"]["requires"])


def validator_spec(ws: Workspace, index_url: str = PYPI) -> LockSpec:
    return LockSpec(
        path=validator_lock_path(ws),
        title="the validator's dependencies (pyproject.toml [project].dependencies)",
        command=f"{COMMAND} validator",
        requirements=core_dependencies(ws.root / "pyproject.toml"),
        index_url=index_url,
    )


def installer_spec(ws: Workspace, index_url: str = PYPI) -> LockSpec:
    """pip itself, for the bundle's offline install (``imagectl.supply.bundle``)."""
    return LockSpec(
        path=installer_lock_path(ws),
        title="the installer the validator bundle carries (pip)",
        command=f"{COMMAND} installer",
        requirements=("pip",),
        index_url=index_url,
    )


def controller_spec(ws: Workspace, index_url: str = PYPI) -> LockSpec:
    """What a workflow job installs before it runs imagectl with cloud credentials."""
    pyproject = ws.root / "pyproject.toml"
    return LockSpec(
        path=controller_lock_path(ws),
        title=f"the workflows' controller (imagectl[{CONTROLLER_EXTRA}] and its build backend)",
        command=f"{COMMAND} controller",
        requirements=(
            *core_dependencies(pyproject),
            *extra_dependencies(pyproject, CONTROLLER_EXTRA),
            *build_requirements(pyproject),
        ),
        index_url=index_url,
        pythons=(CONTROLLER_PYTHON,),
    )


def dev_spec(ws: Workspace, index_url: str = PYPI) -> LockSpec:
    """What the test jobs install (``make venv``) before they lint and test."""
    pyproject = ws.root / "pyproject.toml"
    extras: list[str] = []
    for extra in DEV_EXTRAS:
        extras += [r for r in extra_dependencies(pyproject, extra) if r not in extras]
    return LockSpec(
        path=dev_lock_path(ws),
        title=f"the test jobs' venv (imagectl[{','.join(DEV_EXTRAS)}] and its build backend)",
        command=f"{COMMAND} dev",
        requirements=(*core_dependencies(pyproject), *extras, *build_requirements(pyproject)),
        index_url=index_url,
        pythons=(CONTROLLER_PYTHON,),
    )


def toolkit_specs(ws: Workspace, index_url: str | None = None) -> list[LockSpec]:
    """One spec per toolkit (torch release + CUDA variant) a stack pins."""
    compat = load_compat(ws.compat_dir)
    pins: set[tuple[str, str]] = set()
    for path in stack_paths(ws.stacks_dir):
        tk = load_resolved(ws.images, path.stem)[1].validator_toolkit
        if tk is not None:
            pins.add((tk["torch"], tk["variant"]))
    return [
        LockSpec(
            path=toolkit_lock_path(torch, variant, ws),
            title=f"the validator's GPU toolkit, torch {torch} ({variant})",
            command=f"{COMMAND} toolkit",
            requirements=(toolkit_requirement(torch, variant),),
            index_url=index_url or compat.toolkit_index.format(variant=variant),
        )
        for torch, variant in sorted(pins)
    ]


def make_lock(spec: LockSpec) -> Lock:
    per_python = {
        python: resolve(
            spec.requirements, python=python, platforms=spec.platforms, index_url=spec.index_url
        )
        for python in spec.pythons
    }
    return Lock(
        title=spec.title,
        command=spec.command,
        requirements=spec.requirements,
        pythons=spec.pythons,
        platforms=spec.platforms,
        entries=merge(per_python),
    )


def write_lock(spec: LockSpec) -> Path:
    spec.path.parent.mkdir(parents=True, exist_ok=True)
    spec.path.write_text(make_lock(spec).render(), encoding="utf-8")
    return spec.path


def is_current(spec: LockSpec) -> bool:
    """The committed lock was made from these inputs (requirements, Pythons, platforms)."""
    lock = load(spec.path)
    want = inputs_digest(spec.requirements, spec.pythons, spec.platforms)
    return lock.inputs_digest == want and lock.title == spec.title


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("which", nargs="?", choices=list(WHICH), default="all")
    parser.add_argument("--index-url", help="the package index (default: PyPI / the variant's)")
    parser.add_argument("--root", help="the imagectl checkout (default: found from here)")
    args = parser.parse_args(argv)
    try:
        ws = find_workspace(args.root)
        specs: list[LockSpec] = []
        if args.which in ("validator", "all"):
            specs.append(validator_spec(ws, args.index_url or PYPI))
        if args.which in ("installer", "all"):
            specs.append(installer_spec(ws, args.index_url or PYPI))
        if args.which in ("controller", "all"):
            specs.append(controller_spec(ws, args.index_url or PYPI))
        if args.which in ("dev", "all"):
            specs.append(dev_spec(ws, args.index_url or PYPI))
        if args.which in ("toolkit", "all"):
            specs += toolkit_specs(ws, args.index_url)
        for spec in specs:
            print(f"{ws.relative(write_lock(spec))}: {spec.title} from {spec.index_url}")
    except UserError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
