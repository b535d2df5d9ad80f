"""The README is short and true: what imagectl is, the two commands, a ten-line tour whose
every command parses with the real command line (the offline ones run and pass), and links
into the docs site that all resolve; the rest lives in docs/ (tests/docs/test_docs_pages.py,
and `mkdocs build --strict` in `make lint`)."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml

from tests.cli.hints import parse
from tests.docs.pages import DOCS, REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _tour() -> list[list[str]]:
    section = README.split("\n## A tour\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```sh\n(.*?)^```$", section, re.M | re.S)
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= 250


def test_the_two_commands_are_as_they_were() -> None:
    section = README.split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("```sh\nmake run\n```") == 1
    assert section.count("```sh\nmake test\n```") == 1
    assert "Set everything up and run the whole test suite (ruff, mypy, pytest; what CI runs)" in (
        section
    )


def test_the_tour_is_ten_commands_that_parse() -> None:
    tour = _tour()
    assert len(tour) == 10
    for argv in tour:
        assert argv[0] == "imagectl", argv
        parse(argv[1:])


@pytest.mark.parametrize("verb", ["compat", "validate"])
def test_the_tours_offline_commands_run_and_pass(verb: str, cli, monkeypatch) -> None:
    (argv,) = [a for a in _tour() if a[1] == verb]
    monkeypatch.chdir(REPO)  # the tour's paths are the checkout's
    result = cli(*argv[1:])
    assert result.code == 0, result.err[-2000:]


def test_every_link_resolves_and_every_docs_page_is_linked() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert links
    for link in links:
        if not link.startswith(("http:", "https:")):
            assert (REPO / link).is_file(), f"README links to {link}, which is not a file"
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md")), "mkdocs.yml's nav"
    linked = {link.removeprefix("docs/") for link in links if link.startswith("docs/")}
    assert sorted(set(nav) - linked) == [], "docs pages the README does not link"
