"""Read stack files: YAML with line numbers, validated against the schema.

Every problem names the file and line and says what to fix. ``load_stack`` raises
``StackError`` with all problems of a file at once, not just the first.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagectl.errors import StackError, UserError
from imagectl.stacks.schema import Stack
from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError


@dataclass(frozen=True)
class LoadedStack:
    """A validated stack with where it came from (for messages) and its raw YAML tree."""

    stack: Stack
    path: Path
    raw: CommentedMap

    def line_of(self, *loc: str | int) -> int:
        return locate(self.raw, loc)

    def where(self, *loc: str | int) -> str:
        return f"{self.path}:{self.line_of(*loc)}"


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def read_yaml(path: Path) -> CommentedMap:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read stack file {path}: {exc.strerror}") from exc
    try:
        data = _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        raise StackError([f"{path}:{line}: {problem}"], path=str(path)) from exc
    except Exception as exc:  # ruamel raises a few non-marked errors (duplicate keys etc.)
        raise StackError([f"{path}:1: {exc}"], path=str(path)) from exc
    if not isinstance(data, CommentedMap):
        raise StackError(
            [f"{path}:1: a stack file must be a YAML mapping (name:, os:, nvidia:, ...)"],
            path=str(path),
        )
    return data


def locate(node: Any, loc: tuple[str | int, ...] | list[str | int]) -> int:
    """1-based line of the deepest existing node along ``loc``."""
    line = 1
    for key in loc:
        if isinstance(node, CommentedMap) and key in node:
            line = node.lc.key(key)[0] + 1
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and key < len(node):
            line = node.lc.item(key)[0] + 1
            node = node[key]
        else:
            if isinstance(node, (CommentedMap, CommentedSeq)) and node.lc.line is not None:
                line = max(line, node.lc.line + 1)
            break
    return line


def _allowed_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """Field names of the sub-model reached by ``loc`` (for did-you-mean hints)."""
    current: Any = model
    for key in loc:
        if isinstance(key, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or key not in fields:
            return []
        annotation = fields[key].annotation
        current = _model_in(annotation)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _describe(err: Any, path: Path, raw: CommentedMap) -> str:
    loc = tuple(err["loc"])
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    line = locate(raw, loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(Stack, loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean '{near[0]}'?" if near else f"allowed keys: {', '.join(allowed)}"
        return f"{path}:{line}: unknown key '{dotted}'; {hint}"
    if kind == "missing":
        return f"{path}:{line}: '{dotted}' is required but missing; add it"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"{path}:{line}: {dotted}: {msg}"
    return f"{path}:{line}: {dotted}: {msg}"


def load_stack(path: Path) -> LoadedStack:
    raw = read_yaml(path)
    try:
        stack = Stack.model_validate(_plain(raw))
    except ValidationError as exc:
        problems = [_describe(e, path, raw) for e in exc.errors()]
        raise StackError(problems, path=str(path)) from exc
    if stack.name != path.stem:
        line = locate(raw, ("name",))
        raise StackError(
            [f"{path}:{line}: name '{stack.name}' must match the file name '{path.stem}'"],
            path=str(path),
        )
    return LoadedStack(stack=stack, path=path, raw=raw)


def _plain(node: Any) -> Any:
    """ruamel's round-trip types -> plain dict/list/str for pydantic."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if hasattr(node, "isoformat"):
        return node.isoformat()
    if type(node).__name__ == "ScalarFloat":
        return str(node)
    return node


def stack_paths(stacks_dir: Path) -> list[Path]:
    return sorted(p for p in stacks_dir.glob("*.yaml") if not p.name.startswith("_"))


def find_stack(stacks_dir: Path, name: str) -> Path:
    path = stacks_dir / f"{name}.yaml"
    if not path.is_file():
        known = [p.stem for p in stack_paths(stacks_dir)]
        raise UserError(
            f"no stack named '{name}' in {stacks_dir}",
            hint=f"Known stacks: {', '.join(known) or 'none'}",
        )
    return path
