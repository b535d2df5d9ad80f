"""Stack pin files: schema, loading with line numbers, derived pins and digest."""

from __future__ import annotations

from pathlib import Path

from imagectl.compat.data import load_compat
from imagectl.stacks.loader import LoadedStack, find_stack, load_stack, stack_paths
from imagectl.stacks.resolve import ResolvedStack, resolve, stack_digest
from imagectl.stacks.schema import Stack

__all__ = [
    "LoadedStack",
    "ResolvedStack",
    "Stack",
    "find_stack",
    "load_resolved",
    "load_stack",
    "resolve",
    "stack_digest",
    "stack_paths",
]


def load_resolved(images_dir: Path, name: str) -> tuple[LoadedStack, ResolvedStack]:
    """Load ``images/stacks/<name>.yaml`` and resolve its derived pins."""
    loaded = load_stack(find_stack(images_dir / "stacks", name))
    return loaded, resolve(loaded.stack, load_compat(images_dir / "compat"))
