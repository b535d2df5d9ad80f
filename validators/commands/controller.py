"""What a host-side command asks of the controller, handed in rather than imported.

The controller's root group carries a ``validator_hooks`` attribute
(``imagectl.cli.hostside.HOOKS``): where the workspace's ``images/`` is (``--root``,
``$IMAGECTL_ROOT`` or the current folder), a stack's expectations for ``validate
--stack``, and the completers for ``--stack``, ``--shape`` and ``--gpu``. Under a group
without it, the commands read the images shipped in the package, ``--stack`` is refused
and nothing completes. The validator imports nothing of the controller
(``tests/test_import_graph.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem

import imagectl.images

if TYPE_CHECKING:
    from imagectl.validators.expectations import Expectations

Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]


def _bundled_images(ctx: click.Context) -> Path:
    return Path(imagectl.images.__file__).parent


@dataclass(frozen=True)
class ControllerHooks:
    images_dir: Callable[[click.Context], Path] = _bundled_images
    # (images dir, stack name, shape or None) -> the expectations; None: no controller
    stack_expectations: Callable[[Path, str, str | None], Expectations] | None = None
    completers: Mapping[str, Completer] = field(default_factory=dict)


STANDALONE = ControllerHooks()


def hooks(ctx: click.Context) -> ControllerHooks:
    found = getattr(ctx.find_root().command, "validator_hooks", None)
    return found if isinstance(found, ControllerHooks) else STANDALONE


def complete(option: str) -> Completer:
    """The controller's completer for ``option`` (``stack``, ``shape``, ``gpu``), or none."""

    def completer(
        ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        found = hooks(ctx).completers.get(option)
        return found(ctx, param, incomplete) if found is not None else []

    return completer
