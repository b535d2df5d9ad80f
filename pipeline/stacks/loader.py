"""Read stack files: YAML with line numbers, validated against the schema.

Parsing uses libyaml's composer (fast) and keeps the node tree for line numbers.
Rewriting a stack (``imagectl drift --write``) uses ruamel's round-trip mode instead,
which preserves comments and layout.

Every problem names the file and line and says what to fix. ``load_stack`` raises
``StackError`` with all problems of a file at once, not just the first.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from imagectl.core.errors import StackError, UserError
from imagectl.stacks.schema import STACK_NAME, Clouds, Stack, clouds_model

# libyaml's loader where PyYAML was built with it (the wheels are), else the pure one
_Loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)
_FLOAT = "tag:yaml.org,2002:float"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"


@dataclass(frozen=True)
class LoadedStack:
    """A validated stack with where it came from (for messages) and its YAML node tree."""

    stack: Stack
    path: Path
    raw: yaml.MappingNode

    def line_of(self, *loc: str | int) -> int:
        return locate(self.raw, loc)

    def where(self, *loc: str | int) -> str:
        return f"{self.path}:{self.line_of(*loc)}"


# Bounds for a hostile stack file: a real stack is a few KB, a dozen levels deep, with
# no aliases and short numbers. Anything past these is refused before it is composed
# (libyaml's composer recurses: 50,000 levels crash it; aliases can expand a 1 KB file
# into billions of nodes when it becomes plain data).
MAX_STACK_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_SCALAR_DIGITS = 40
# What YAML 1.1 resolves as an int (decimal, 0x, 0o/0, 0b, with _ separators).
_INT_TEXT = re.compile(r"[-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0o?[0-7_]+|[0-9][0-9_:]*)")


def _read_text(path: Path) -> str:
    """The file's text, refusing what a stack file cannot be (device, huge, not UTF-8)."""
    try:
        with path.open("rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise StackError(
                    [
                        f"{path}: not a regular file (a device, FIFO or folder); a stack file "
                        "is a small YAML file in images/stacks/"
                    ],
                    path=str(path),
                )
            data = fh.read(MAX_STACK_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read stack file {path}: {exc.strerror}") from exc
    if len(data) > MAX_STACK_BYTES:
        raise StackError(
            [f"{path}: larger than {MAX_STACK_BYTES // 1024} KiB; a stack file is a few KB"],
            path=str(path),
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise StackError(
            [f"{path}:{line}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"],
            path=str(path),
        ) from exc


def _screen(text: str, path: Path) -> None:
    """One pass over libyaml's events: refuse aliases, deep nesting and huge numbers
    before the composer sees them (stops at the first problem, so it stays linear)."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        line = event.start_mark.line + 1 if event.start_mark else 1
        if isinstance(event, yaml.AliasEvent):
            raise StackError(
                [
                    f"{path}:{line}: YAML aliases (*{event.anchor}) are not allowed in a stack "
                    "file; write the value out"
                ],
                path=str(path),
            )
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise StackError(
                    [
                        f"{path}:{line}: nested more than {MAX_DEPTH} levels deep; a stack "
                        "file is a few levels of mappings"
                    ],
                    path=str(path),
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif (
            isinstance(event, yaml.ScalarEvent)
            and event.implicit[0]
            and len(event.value) > MAX_SCALAR_DIGITS
            and _INT_TEXT.fullmatch(event.value)
        ):
            raise StackError(
                [
                    f"{path}:{line}: a number {len(event.value)} digits long; no number in a "
                    "stack file is that long (quote it if it is text)"
                ],
                path=str(path),
            )


def read_yaml(path: Path, text: str | None = None) -> yaml.MappingNode:
    """Compose the file (libyaml when present): a node tree that keeps every line.
    ``text``: the file's text when the caller read it already."""
    text = _read_text(path) if text is None else text
    try:
        _screen(text, path)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        if "nesting depth" in problem:
            # the libyaml in PyYAML 6.0.4 wheels stops deep flow nesting itself, while
            # scanning ahead, before the event screen above counts it: the same refusal.
            problem = (
                f"nested more than {MAX_DEPTH} levels deep; a stack file is a few levels of "
                "mappings"
            )
        raise StackError([f"{path}:{line}: {problem}"], path=str(path)) from exc
    except yaml.YAMLError as exc:
        raise StackError([f"{path}:1: {exc}"], path=str(path)) from exc
    if not isinstance(node, yaml.MappingNode):
        raise StackError(
            [f"{path}:1: a stack file must be a YAML mapping (name:, os:, nvidia:, ...)"],
            path=str(path),
        )
    bad_keys = list(_non_scalar_keys(node))
    if bad_keys:
        raise StackError(
            [
                f"{path}:{line}: a key must be a plain word, not a list or mapping"
                for line in bad_keys
            ],
            path=str(path),
        )
    dupes = list(_duplicate_keys(node))
    if dupes:
        raise StackError(
            [f"{path}:{line}: key '{key}' appears twice" for key, line in dupes], path=str(path)
        )
    return node


def _non_scalar_keys(node: yaml.Node) -> Iterator[int]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                yield key.start_mark.line + 1
            yield from _non_scalar_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _non_scalar_keys(item)


def _duplicate_keys(node: yaml.Node) -> Iterator[tuple[str, int]]:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if key.value in seen:
                yield key.value, key.start_mark.line + 1
            seen.add(key.value)
            yield from _duplicate_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _duplicate_keys(item)


def to_plain(node: yaml.Node) -> object:
    """Node tree -> plain data. Floats keep their text ("12.10" stays "12.10"): every
    dotted number in a stack is a version, never arithmetic."""
    if isinstance(node, yaml.MappingNode):
        return {str(k.value): to_plain(v) for k, v in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [to_plain(v) for v in node.value]
    assert isinstance(node, yaml.ScalarNode)
    if node.tag == _FLOAT:
        return node.value
    if node.tag in (_INT, _BOOL, _NULL):
        return yaml.load(node.value or "null", Loader=_Loader)
    return node.value


def locate(node: yaml.Node, loc: tuple[str | int, ...] | list[str | int]) -> int:
    """1-based line of the deepest existing node along ``loc``."""
    line = node.start_mark.line + 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if kv[0].value == str(key)), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _allowed_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """Field names of the sub-model reached by ``loc`` (for did-you-mean hints)."""
    current: type[BaseModel] | None = model
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
        if current is Clouds:  # one field per registered cloud
            current = clouds_model()
    return list(getattr(current, "model_fields", {}))


def _model_in(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _describe(err: ErrorDetails, path: Path, raw: yaml.MappingNode) -> str:
    loc = tuple(err["loc"])
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    line = locate(raw, loc)
    kind = err["type"]
    if kind == "extra_forbidden" and loc[:-1] == ("clouds",):
        registered = _allowed_keys(Stack, ("clouds",))
        return (
            f"{path}:{line}: unknown cloud '{loc[-1]}' under clouds: imagectl knows "
            f"{', '.join(registered)}; fix the name, or install the distribution that "
            "registers this cloud (entry point group imagectl.clouds)"
        )
    if kind == "extra_forbidden":
        allowed = _allowed_keys(Stack, loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean '{near[0]}'?" if near else f"allowed keys: {', '.join(allowed)}"
        return f"{path}:{line}: unknown key '{dotted}'; {hint}"
    if kind == "missing":
        return f"{path}:{line}: '{dotted}' is required but missing; add it"
    if kind in ("string_pattern_mismatch", "string_too_long"):
        shown = repr(str(err.get("input", "")))
        shown = shown if len(shown) <= 80 else shown[:77] + "...'"
        ctx = err.get("ctx") or {}
        rule = (
            f"match {ctx['pattern']}"
            if "pattern" in ctx
            else f"be at most {ctx.get('max_length')} characters"
        )
        return (
            f"{path}:{line}: {dotted}: {shown} is not allowed here; it must {rule} "
            "(see images/schema/stack.schema.json)"
        )
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"{path}:{line}: {dotted}: {msg}"
    return f"{path}:{line}: {dotted}: {msg}"


# Each stack file is parsed once per process: a parse (compose, screen, validate) is kept
# by the file's path and exact text, and the clouds registered when it was validated (the
# schema's clouds: section is theirs), so every later load of the same text returns the
# same (frozen) LoadedStack, and a file edited since is parsed again. Only a successful
# parse is kept; a bad file is refused again each time.
_PARSED: dict[tuple[str, str, type[Clouds]], LoadedStack] = {}
_MAX_PARSED = 256
_parses = 0


def parse_count() -> int:
    """How many stack files this process has parsed (a load served from the cache is not
    one): the "stack parsed once per process" tests count with it."""
    return _parses


def load_stack(path: Path) -> LoadedStack:
    """The stack file at ``path``, parsed and validated (once per process per text)."""
    global _parses
    text = _read_text(path)
    key = (str(path), text, clouds_model())
    cached = _PARSED.get(key)
    if cached is not None:
        return cached
    loaded = _parse(path, text)
    _parses += 1
    if len(_PARSED) >= _MAX_PARSED:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = loaded
    return loaded


def _parse(path: Path, text: str) -> LoadedStack:
    raw = read_yaml(path, text)
    try:
        stack = Stack.model_validate(to_plain(raw))
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


def stack_paths(stacks_dir: Path) -> list[Path]:
    return sorted(p for p in stacks_dir.glob("*.yaml") if not p.name.startswith("_"))


def find_stack(stacks_dir: Path, name: str) -> Path:
    """``images/stacks/<name>.yaml``; ``name`` is a stack name, never a path."""
    if not STACK_NAME.match(name):
        raise UserError(
            f"'{name[:80]}' is not a stack name: 2-40 lowercase letters, digits and '-' "
            f"(a file name in {stacks_dir} without .yaml, not a path)",
            hint="See `imagectl lint` for the known stacks",
        )
    path = stacks_dir / f"{name}.yaml"
    if not path.is_file():
        known = [p.stem for p in stack_paths(stacks_dir)]
        raise UserError(
            f"no stack named '{name}' in {stacks_dir}",
            hint=f"Known stacks: {', '.join(known) or 'none'}",
        )
    return path
