"""Rule sources shown to users cite documents, not internal work items.

Every ``source`` (and ``*_source``) string of the rule and threshold data under
``images/compat`` and ``validators/data``, and the source column of the validator's rule
tables, may name an issue or a pull request only as a public repository's
(``owner/repo issue N``, ``owner/repo PR N``): "issue: validator truth" or "validator issue"
means nothing to a reader outside this project.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DATA = sorted(
    [*(REPO / "images" / "compat").glob("*.yaml"), *(REPO / "validators" / "data").glob("*.yaml")]
)
# a reference to a work item: the word issue or PR with a colon or a number after it, or
# "work item"; the English word ("an interrupt issue with the GPU") is not one
MENTION = re.compile(
    r"\b(issues?|PR|pull requests?|tickets?)\s*(:|#?\d)|\bwork items?\b", re.IGNORECASE
)
PUBLIC = re.compile(r"[\w.-]+/[\w.-]+ (issues?|PR|pull requests?) #?\d+", re.IGNORECASE)


def _sources(node: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}"
            if isinstance(value, str) and (key == "source" or str(key).endswith("_source")):
                yield here, value
            else:
                yield from _sources(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _sources(value, f"{where}[{i}]")


def _internal(text: str) -> list[str]:
    """Mentions of an issue/PR/work item that are not a public repository's."""
    stripped = PUBLIC.sub("", text)
    return [m.group(0) for m in MENTION.finditer(stripped)]


@pytest.mark.parametrize("path", DATA, ids=lambda p: p.name)
def test_data_sources_cite_documents(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    bad = [(where, text) for where, text in _sources(doc, path.name) if _internal(text)]
    assert not bad, bad


# the validator's pages of the docs site: its rule, check, fabric and threshold tables
VALIDATOR_PAGES = sorted((REPO / "docs").glob("validator-*.md"))


def test_validator_rule_tables_cite_documents() -> None:
    assert len(VALIDATOR_PAGES) >= 5, VALIDATOR_PAGES
    text = "\n".join(page.read_text() for page in VALIDATOR_PAGES)
    rows = [ln for ln in text.splitlines() if ln.startswith("|") and ln.count("|") >= 5]
    assert len(rows) > 150, len(rows)
    bad = [row for row in rows if _internal(row.rstrip(" |").rsplit("|", 1)[-1])]
    assert not bad, bad


def test_the_check_itself_tells_internal_from_public() -> None:
    assert _internal("imagectl: a check (issue: validator truth, part 1)")
    assert _internal("validator issue: sample at 2 Hz")
    assert not _internal("NVIDIA/nccl issue 1264, wilicc/gpu-burn issue 114")
    assert not _internal("modal-labs/modal-client PR 2797 (nvidia-smi totals)")
    assert not _internal("the driver detected an interrupt issue with the GPU")
