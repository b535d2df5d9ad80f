"""Image states are ImageState members, never raw strings, wherever the catalog's state of
an image is set, tagged or compared (one source of truth for the lifecycle)."""

from __future__ import annotations

import ast
from pathlib import Path

from imagectl.catalog.lifecycle import ImageState

ROOT = Path(__file__).resolve().parents[2] / "pipeline"
STATES = {s.value for s in ImageState}
# Packages that read the catalog's image states (cloud providers compare their own
# resource states, which share words like "deprecated" with the lifecycle).
CATALOG_USERS = ("promotion", "validation", "local", "cli", "catalog", "drift")


def _raw_states(node: ast.AST) -> list[str]:
    """The image-state literals of a comparison or argument; a tuple that also holds other
    words (a cloud instance's "terminated", a promotion's "failed") is about something else."""
    values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    words = [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return words if words and all(w in STATES for w in words) else []


def _is_state(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "state") or (
        isinstance(node, ast.Name) and node.id in ("state", "previous")
    )


def offences() -> list[str]:
    found = []
    for py in sorted(ROOT.rglob("*.py")):
        rel = py.relative_to(ROOT)
        if (rel.parts[0] == "catalog" and rel.name == "lifecycle.py") or "migrations" in rel.parts:
            continue
        tree = ast.parse(py.read_text(), filename=str(py))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in ("set_state", "tag_state"):
                    for arg in node.args[1:]:
                        found += [f"{rel}:{node.lineno} {name}({s!r})" for s in _raw_states(arg)]
            elif (
                isinstance(node, ast.Compare)
                and rel.parts[0] in CATALOG_USERS
                and _is_state(node.left)
            ):
                for comp in node.comparators:
                    found += [f"{rel}:{node.lineno} state vs {s!r}" for s in _raw_states(comp)]
    return found


def test_no_raw_image_state_strings() -> None:
    assert offences() == []


def test_the_scan_finds_a_raw_state(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "promotion" / "bad.py"
    bad.parent.mkdir()
    bad.write_text(
        "def f(img, s):\n"
        "    if img.state == 'promoted':\n"
        "        repo.set_state(s, img, 'rolled_back')\n"
    )
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert offences() == [
        "promotion/bad.py:2 state vs 'promoted'",
        "promotion/bad.py:3 set_state('rolled_back')",
    ]
