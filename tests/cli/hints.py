"""The hint and fix texts the command line can print, and the commands they name, parsed
with the real ``imagectl`` click command line (``tests/cli/test_hints.py``).

The texts are collected from the sources, so a new hint is covered the day it is written:

- every string (and f-string) in ``pipeline/`` and ``validators/`` that is not a
  docstring: a command in backticks (`` `imagectl promote IMAGE` ``), or a whole string that
  is a command (the resume and rollback lines the promotion prints);
- the fix and hint texts of the data files (every ``fix:`` / ``hint:`` of the YAML under
  ``images/``, ``pipeline/`` and ``validators/``).

A hint text (``hint=``, ``fix=``, a ``*HINT*`` constant, a data file's ``fix:``) writes
every command it names in backticks, so the reader (and this test) knows where it ends.

Placeholders are filled by kind: an upper-case word (``IMAGE``, ``FILE``) from
``PLACEHOLDERS``, an f-string field from ``FIELD_KINDS`` by its last name (``{stack}``,
``{img.cloud}``). A placeholder of no known kind fails the test: name what it stands for.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from imagectl.cli import COMMANDS, cli

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pipeline", "validators")

# placeholder word -> a real value of that kind
PLACEHOLDERS = {
    "IMAGE": "ami-0123456789abcdef0",
    "IMAGE_A": "ami-0123456789abcdef0",
    "IMAGE_B": "ami-0fedcba9876543210",
    "STACK": "h100-training",
    "CLOUD": "aws",
    "REGION": "us-east-1",
    "SHAPE": "p5.48xlarge",
    "FILE": str(REPO / "pyproject.toml"),
    "DIR": str(REPO),
    "HOSTFILE": str(REPO / "pyproject.toml"),
    "SNAPSHOT": str(REPO / "tests" / "snapshots" / "h100-sxm-8x.json"),
    "N": "2",
    "CIDR": "203.0.113.7/32",
    "REASON": "why",
    "VERSION": "3.11",
}
# f-string field (its last name) -> the placeholder kind it holds
FIELD_KINDS = {
    "stack": "STACK",
    "name": "STACK",
    "cloud": "CLOUD",
    "image": "IMAGE",
    "image_id": "IMAGE",
    "cloud_image_id": "IMAGE",
    "ident": "IMAGE",
    "nodes": "N",
    "profile": "PROFILE",
    "have": "VERSION",
    "python": "VERSION",
    "region": "REGION",
    "regions": "REGION",
    "shape": "SHAPE",
    "path": "FILE",
    "out": "FILE",
    "trust": "FILE",
    "hosts": "N",
}
PLACEHOLDERS["PROFILE"] = "boot"

COMMAND_NAMES = "|".join(sorted(map(re.escape, COMMANDS), key=len, reverse=True))
MENTION = re.compile(rf"(?<![\w.-])imagectl(?:\s+--root(?:\s+|=)\S+)?\s+(?:{COMMAND_NAMES})\b")
LAUNCHER = re.compile(r"^(?:sudo\s+)?(?:\S*/)?imagectl\s")
HINT_KEYWORDS = ("hint", "fix")


@dataclass(frozen=True)
class Text:
    where: str  # file:line
    text: str  # f-string fields as {expr}
    hint: bool  # a hint or fix text


def _render(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = ""
        for value in node.values:
            if isinstance(value, ast.Constant):
                out += str(value.value)
            else:
                assert isinstance(value, ast.FormattedValue)
                out += "{" + ast.unparse(value.value) + "}"
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _render(node.left), _render(node.right)
        return None if left is None or right is None else left + right
    return None


def _hint_nodes(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are hint or fix texts."""
    found: set[int] = set()

    def mark(value: ast.AST) -> None:
        for sub in ast.walk(value):
            if isinstance(sub, ast.Constant | ast.JoinedStr):
                found.add(id(sub))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in HINT_KEYWORDS:
                    mark(kw.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [ast.unparse(t) for t in targets]
            if node.value is not None and any(re.search(r"hint|fix", n, re.I) for n in names):
                mark(node.value)
    return found


def python_texts() -> Iterator[Text]:
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                and node.body
                and isinstance(node.body[0], ast.Expr)
            }
            hints = _hint_nodes(tree)
            inside_fstring = {
                id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values
            }
            rel = path.relative_to(REPO).as_posix()
            for node in ast.walk(tree):
                if id(node) in docstrings or id(node) in inside_fstring:
                    continue
                if isinstance(node, ast.Constant | ast.JoinedStr):
                    text = _render(node)
                    if text is not None:
                        yield Text(f"{rel}:{node.lineno}", text, id(node) in hints)


def _fix_fields(data: object, where: str) -> Iterator[Text]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key in HINT_KEYWORDS and isinstance(value, str):
                yield Text(where, value, True)
            else:
                yield from _fix_fields(value, f"{where}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _fix_fields(value, f"{where}[{i}]")


def data_texts() -> Iterator[Text]:
    """The ``fix:`` / ``hint:`` fields of every data file the command line reads."""
    for folder in ("images", *SOURCES):
        for path in sorted((REPO / folder).rglob("*.yaml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            yield from _fix_fields(doc, path.relative_to(REPO).as_posix() + ":")


def all_texts() -> list[Text]:
    return [*python_texts(), *data_texts()]


def commands_in(text: str) -> list[str]:
    """The commands a text names: in backticks, or the whole text."""
    found = [seg for seg in re.findall(r"`([^`]+)`", text) if LAUNCHER.match(seg + " ")]
    stripped = text.strip()
    if not found and LAUNCHER.match(stripped) and MENTION.match(stripped):
        found.append(stripped)
    return found


def unquoted_mentions(text: str) -> list[str]:
    """Commands named outside backticks (where would they end?)."""
    outside = re.sub(r"`[^`]*`", "``", text)
    return [m.group(0) for m in MENTION.finditer(outside)]


def fill(command: str) -> list[str]:
    """The command's argv with every placeholder filled; KeyError names an unknown one."""

    def field(match: re.Match[str]) -> str:
        expr = match.group(1)
        last = re.findall(r"[A-Za-z_]\w*", expr.split("[")[0])[-1]
        kind = FIELD_KINDS[last]
        return PLACEHOLDERS[kind]

    command = re.sub(r"\{([^{}]+)\}", field, command)
    argv = shlex.split(command.replace("...", "x"))
    while argv and argv[0] == "sudo":
        argv.pop(0)
    assert argv and argv[0].endswith("imagectl"), command
    out = []
    for token in argv[1:]:
        value = token.split("=", 1)
        if len(value) == 2 and value[0].startswith("--"):
            out.append(f"{value[0]}={PLACEHOLDERS.get(value[1], value[1])}")
        elif re.fullmatch(r"[A-Z][A-Z_]*", token):
            out.append(PLACEHOLDERS[token])
        else:
            out.append(token)
    return out


def parse(argv: list[str]) -> None:
    """Parse ``argv`` with the real command line, every group level down to the command,
    without running it (click's own parser: options, arguments, choices, callbacks)."""
    ctx = cli.make_context("imagectl", list(argv))
    group: click.Command = cli
    rest = [*ctx._protected_args, *ctx.args]  # type: ignore[attr-defined]
    while isinstance(group, click.Group) and rest:
        name, cmd, rest = group.resolve_command(ctx, rest)
        assert cmd is not None and name is not None
        ctx = cmd.make_context(name, rest, parent=ctx)
        group = cmd
        rest = (
            [*getattr(ctx, "_protected_args", []), *ctx.args]
            if isinstance(cmd, click.Group)
            else []
        )


TEXTS = all_texts()
COMMANDS_NAMED = sorted({(c, t.where) for t in TEXTS for c in commands_in(t.text)})
