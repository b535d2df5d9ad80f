"""The docs site's generated tables are what the data renders (tests/docs/pages.py): the
check registry, the thresholds and the environment variables. A check, threshold or
variable added without running ``python -m tests.docs.pages`` fails here, naming the page."""

from __future__ import annotations

import re

import pytest

from tests.docs.pages import DOCS, TABLES, begin, block, end, registered_checks, rewrite, stale


def test_every_generated_table_is_what_the_data_renders() -> None:
    assert stale() == [], "run python -m tests.docs.pages"


def test_every_check_of_the_registry_has_its_row() -> None:
    text = (DOCS / "validator-checks.md").read_text(encoding="utf-8")
    specs = registered_checks()
    assert len(specs) > 90
    for spec in specs:
        check_id = f"{spec.id}*" if spec.is_family else spec.id
        assert f"| `{check_id}` | {spec.title.replace('|', chr(92) + '|')}" in text, spec.id
    # the runner's own checks and those judged elsewhere (CUDA, load, DCGM, collectives)
    for check_id in ("nvml.init", "cuda.init", "load.ecc", "dcgm.diag", "collective.all_reduce"):
        assert f"| `{check_id}` |" in text, check_id


def test_every_threshold_has_its_row() -> None:
    from imagectl.validators.catalogs import thresholds

    text = (DOCS / "validator-thresholds.md").read_text(encoding="utf-8")
    for key in thresholds().values:
        assert f"| `{key}` |" in text, key


@pytest.mark.parametrize("name", sorted(TABLES))
def test_rewrite_renders_the_block_and_keeps_the_rest(name: str) -> None:
    hand = "# Page\n\nwritten by hand\n\n"
    text = hand + f"{begin(name)}\n| stale | row |\n{end(name)}\n\nafter, by hand\n"
    rewritten = rewrite(text, name)
    assert rewritten == hand + block(name) + "\n\nafter, by hand\n"
    assert "| stale | row |" not in rewritten
    assert rewrite(rewritten, name) == rewritten


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_page_without_its_block_or_with_two_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        rewrite("# Page\n", name)
    with pytest.raises(ValueError, match=name):
        rewrite(block(name) + "\n" + block(name), name)


def _keys(doc: dict[str, object], prefix: str = "") -> list[str]:
    out = []
    for key, value in doc.items():
        out.append(f"{prefix}{key}")
        if isinstance(value, dict):
            out += _keys(value, f"{prefix}{key}.")
    return out


def test_every_key_of_every_shipped_stack_has_its_row() -> None:
    """The stack reference is the schema's: each key a shipped stack uses is a row, or sits
    under a row whose type is a mapping of free keys (``clouds.local.packages``)."""
    import yaml

    text = (DOCS / "stack-reference.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("| `")]
    cells = [re.split(r"(?<!\\)\|", line)[1:3] for line in lines]
    rows = {key.strip().strip("`"): kind.strip() for key, kind in cells}
    free = [key for key, kind in rows.items() if kind.startswith("mapping of")]
    stacks = sorted((DOCS.parent / "images" / "stacks").glob("*.yaml"))
    assert len(stacks) >= 4
    for path in stacks:
        for key in _keys(yaml.safe_load(path.read_text(encoding="utf-8"))):
            under_free = any(key.startswith(f"{parent}.") for parent in free)
            assert key in rows or under_free, f"{path.name}: {key} has no row"
