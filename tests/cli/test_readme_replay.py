"""The docs' replay of a shipped snapshot (docs/validator.md): the example runs as
written, and its table maps every healthy snapshot to the shape it was recorded on (the
one its own ``description`` names), each row replaying to a pass with that shape."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.cli.hints import parse
from tests.support import REPO

PAGE = (REPO / "docs" / "validator.md").read_text(encoding="utf-8")
ROWS = re.findall(r"^\| `([\w.-]+\.json)` \| `([\w.-]+)` \|$", PAGE, re.M)
HEALTHY = REPO / "tests" / "snapshots" / "healthy"


def test_the_table_names_every_healthy_snapshot_once() -> None:
    assert sorted(name for name, _ in ROWS) == sorted(p.name for p in HEALTHY.glob("*.json"))


@pytest.mark.parametrize(("snapshot", "shape"), ROWS, ids=[n for n, _ in ROWS])
def test_each_row_is_the_snapshots_own_shape_and_replays_to_a_pass(
    snapshot: str, shape: str, cli
) -> None:
    doc = json.loads((HEALTHY / snapshot).read_text())
    assert f"({shape})" in doc["description"], doc["description"]
    result = cli("validate", "--replay", str(HEALTHY / snapshot), "--shape", shape, "--json")
    assert result.code == 0, result.err[-2000:]
    assert json.loads(result.out)["verdict"] == "pass"


def test_the_example_runs_as_written(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    (example,) = re.findall(r"^imagectl validate --replay .*$", PAGE, re.M)
    argv = shlex.split(example)[1:]
    parse(argv)
    monkeypatch.chdir(REPO)  # the page's paths are the checkout's
    result = cli(*argv)
    assert result.code == 0, result.err[-2000:]
