"""Every `imagectl` invocation in the workflows names a real command with real options.

The `run:` scripts of .github/workflows/*.yml are parsed (line continuations joined,
`${{ }}` expressions replaced by a word, shell operators ending a command) and each
invocation is resolved against the click command tree (`imagectl.cli.cli`, lazily
registered commands through `get_command`): the sub-command (and nested sub-command)
must exist, each option must be one of its options, and positional arguments must fit.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
EXPR = re.compile(r"\$\{\{.*?\}\}", re.S)


@dataclass(frozen=True)
class Invocation:
    workflow: str
    job: str
    step: str
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.workflow} / {self.job} / {self.step}: imagectl {' '.join(self.words)}"


def split_commands(script: str) -> list[list[str]]:
    """Shell words of every `imagectl ...` command in a script (up to an operator)."""
    script = EXPR.sub("EXPR", script).replace("\\\n", " ")
    script = re.sub(r"(?<=\s)\d+(?=[<>])", "", script)  # 2>&1, 2>/dev/null: fd numbers
    out = []
    for line in script.splitlines():
        for m in re.finditer(r"(?:^|[\s;&|(`])imagectl\s", line):
            lexer = shlex.shlex(line[m.end() :], posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = []
            try:
                for token in lexer:
                    if token and set(token) <= set("();<>|&"):
                        break
                    words.append(token)
            except ValueError:  # an unterminated quote: the rest of a multi-line string
                pass
            out.append(words)
    return out


def invocations() -> list[Invocation]:
    found = []
    for path in WORKFLOWS:
        doc = YAML(typ="safe").load(path.read_text())
        for job_id, job in (doc.get("jobs") or {}).items():
            for i, step in enumerate(job.get("steps") or []):
                if "run" not in step:
                    continue
                for words in split_commands(str(step["run"])):
                    found.append(Invocation(path.name, job_id, step.get("name", f"step {i}"),
                                            tuple(words)))  # fmt: skip
    return found


def check(inv: Invocation) -> list[str]:
    """Problems with one invocation, resolved against the real click tree."""
    from imagectl.cli import cli

    problems: list[str] = []
    command: click.Command = cli
    ctx = click.Context(cli, info_name="imagectl")
    words = list(inv.words)
    positional: list[str] = []
    path = ["imagectl"]
    while words:
        word = words.pop(0)
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            option = next((p for p in command.params if isinstance(p, click.Option)
                           and name in (*p.opts, *p.secondary_opts)), None)  # fmt: skip
            if option is None and name in ("-h", "--help"):
                continue
            if option is None:
                problems.append(f"{' '.join(path)} has no option {name}")
                continue
            if not option.is_flag and not option.count and "=" not in word and words:
                words.pop(0)  # the option's value
            continue
        if isinstance(command, click.Group) and not positional:
            sub = command.get_command(ctx, word)
            if sub is None:
                problems.append(f"{' '.join(path)} has no command '{word}'")
                return problems
            command = sub
            path.append(word)
            ctx = click.Context(sub, info_name=word, parent=ctx)
            continue
        positional.append(word)
    if isinstance(command, click.Group):
        problems.append(f"{' '.join(path)} needs a sub-command")
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    unlimited = any(a.nargs == -1 for a in arguments)
    if not unlimited and len(positional) > sum(max(a.nargs, 1) for a in arguments):
        problems.append(f"{' '.join(path)} takes {len(arguments)} argument(s): {positional}")
    return problems


def test_parser_finds_invocations_across_lines_and_expressions():
    script = (
        'x=$(imagectl plan --stack "$s" --json 2>/dev/null | jq .)\n'
        "imagectl build --stack ${{ matrix.stack }} \\\n"
        '  --cloud "$CLOUD" > out.txt\n'
        "echo imagectl-is-not-a-command\n"
    )
    assert split_commands(script) == [
        ["plan", "--stack", "$s", "--json"],
        ["build", "--stack", "EXPR", "--cloud", "$CLOUD"],
    ]


def test_checker_rejects_unknown_commands_and_options():
    def problems(*words: str) -> list[str]:
        return check(Invocation("w", "j", "s", words))

    assert problems("lint", "--stack", "x", "--json") == []
    assert problems("compat", "check", "--driver", "1", "--cuda", "2") == []
    assert problems("lint", "--nope") == ["imagectl lint has no option --nope"]
    assert problems("no-such-command") == ["imagectl has no command 'no-such-command'"]
    assert problems("compat") == ["imagectl compat needs a sub-command"]
    assert problems("lint", "extra") != []


def test_workflows_invoke_the_pipeline():
    commands = {inv.words[0] for inv in invocations() if inv.words}
    assert commands >= {"lint", "plan", "build", "validate-image", "promote", "rollback",
                        "drift", "reap", "diff"}  # fmt: skip


@pytest.mark.parametrize("inv", invocations(), ids=str)
def test_invocation_exists_in_the_cli(inv: Invocation):
    assert check(inv) == []
