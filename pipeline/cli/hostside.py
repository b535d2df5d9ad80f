"""What the controller hands the validator's host-side commands
(``imagectl.validators.commands``): the workspace's ``images/`` (``--root``,
``$IMAGECTL_ROOT`` or the current folder), a stack's expectations for ``validate --stack``
and the completers of ``--stack``, ``--shape`` and ``--gpu``. The root group
(``imagectl.cli.LazyGroup.validator_hooks``) carries them; the controller depends on the
validator here, never the reverse."""

from __future__ import annotations

from pathlib import Path

import click

from imagectl.cli.completion import complete_gpus, complete_shapes, complete_stacks
from imagectl.validators.commands.controller import ControllerHooks
from imagectl.validators.expectations import Expectations


def _images(ctx: click.Context) -> Path:
    from imagectl.cli.common import workspace

    return workspace(ctx).images


def _stack_expectations(images_dir: Path, stack: str, shape: str | None) -> Expectations:
    from imagectl.stacks.expectations import from_stack

    return from_stack(images_dir, stack, shape)


HOOKS = ControllerHooks(
    images_dir=_images,
    stack_expectations=_stack_expectations,
    completers={"stack": complete_stacks, "shape": complete_shapes, "gpu": complete_gpus},
)
