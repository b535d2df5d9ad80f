"""``imagectl diff``: two images' SBOMs in the catalog, compared pins first.

Each image's build gets its SBOM through the production path (``record_build_sbom``
reading ``<build folder>/image/inventory.json`` and ``manifest.json`` as the manifest
role fetches them). The first inventory is this machine's real dpkg database (the role's
script); the second is the same with one held package at another version, as a stack
that changes one pin builds it. The diff must show exactly that one change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.provenance.record import record_build_sbom
from tests.support import require_tool

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "playbooks" / "roles" / "manifest" / "files" / "write-inventory.py"


@pytest.fixture
def env(world, monkeypatch):
    for key, value in world.env().items():
        if key.startswith("IMAGECTL_"):
            monkeypatch.setenv(key, value)
    return world


@pytest.fixture(scope="module")
def real_inventory() -> dict:
    require_tool("dpkg-query")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--kernel", "6.1.0-28-cloud-amd64"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return json.loads(out)


def _with_sbom(
    world, tmp_path: Path, inventory: dict, held: list[str], name: str, *, attest: bool = True
):
    image = world.validated(attest=attest)
    folder = tmp_path / name
    (folder / "image").mkdir(parents=True)
    (folder / "image" / "inventory.json").write_text(json.dumps(inventory))
    (folder / "image" / "manifest.json").write_text(json.dumps({"held": held}))
    path = record_build_sbom(
        world.catalog, image.build_pk, f"b-{name}", folder, world.stack, "local"
    )
    assert path == folder / "sbom.cdx.json" and path.is_file()
    return image


def test_one_changed_pin_is_exactly_the_diff(env, cli, tmp_path, real_inventory) -> None:
    pinned = real_inventory["dpkg"][0]["name"]
    held = [pinned, real_inventory["dpkg"][1]["name"]]
    newer = json.loads(json.dumps(real_inventory))
    old_version = newer["dpkg"][0]["version"]
    newer["dpkg"][0]["version"] = old_version + "+imagectl1"
    first = _with_sbom(env, tmp_path, real_inventory, held, "first")
    second = _with_sbom(env, tmp_path, newer, held, "second")

    r = cli("diff", str(first.id), str(second.id), "--json")
    assert r.code == 0, r.err
    assert r.json()["changes"] == [
        {"section": "pinned", "kind": "changed", "name": pinned, "old": old_version,
         "new": old_version + "+imagectl1"}
    ]  # fmt: skip

    # --stack: the candidate against what is promoted
    assert cli("promote", str(first.id), "--stack", "local").code == 0
    r = cli("diff", "--stack", "local", "--json")
    assert r.code == 0, r.err
    body = r.json()
    assert body["before"] == first.label and body["after"] == second.label
    assert [c["name"] for c in body["changes"]] == [pinned]

    md = cli("diff", str(first.id), str(second.id), "--format", "markdown")
    assert f"| changed | `{pinned}` | `{old_version}` | `{old_version}+imagectl1` |" in md.out


def test_cloud_scopes_cloud_image_ids(env, cli, tmp_path, real_inventory) -> None:
    """``--cloud``: cloud image ids are looked up on that cloud only: the local cloud's ids
    diff as the catalog ids do; on another cloud the same ids name no image (exit 2)."""
    held = [real_inventory["dpkg"][0]["name"]]
    newer = json.loads(json.dumps(real_inventory))
    newer["dpkg"][0]["version"] += "+imagectl1"
    first = _with_sbom(env, tmp_path, real_inventory, held, "first")
    second = _with_sbom(env, tmp_path, newer, held, "second")
    by_id = cli("diff", str(first.id), str(second.id), "--json")
    ids = (first.cloud_image_id, second.cloud_image_id)
    local = cli("diff", *ids, "--cloud", "local", "--json")
    assert local.code == 0 and local.json()["changes"] == by_id.json()["changes"], local.err
    elsewhere = cli("diff", *ids, "--cloud", "aws", "--json")
    assert elsewhere.code == 2 and first.cloud_image_id in " ".join(elsewhere.err.split())


def test_pins_come_first_and_every_kind_is_named(env, cli, tmp_path, real_inventory) -> None:
    debs = real_inventory["dpkg"]
    held = [debs[-1]["name"]]
    newer = json.loads(json.dumps(real_inventory))
    newer["dpkg"][-1]["version"] += "+1"  # the pin, last by name
    removed = newer["dpkg"].pop(0)  # a package by name before it
    newer["python"].append({"name": "zzz-new", "version": "1.0"})
    first = _with_sbom(env, tmp_path, real_inventory, held, "a")
    second = _with_sbom(env, tmp_path, newer, held, "b")
    r = cli("diff", str(first.id), str(second.id), "--json")
    changes = r.json()["changes"]
    assert [(c["section"], c["kind"], c["name"]) for c in changes] == [
        ("pinned", "changed", debs[-1]["name"]),
        ("packages", "removed", removed["name"]),
        ("python", "added", "zzz-new"),
    ]
    assert r.json()["counts"] == {"changed": 1, "added": 1, "removed": 1}


def test_an_image_without_an_sbom_is_bad_input(env, cli, tmp_path, real_inventory) -> None:
    with_sbom = _with_sbom(env, tmp_path, real_inventory, [], "x")
    without = env.validated()
    r = cli("diff", str(with_sbom.id), str(without.id))
    assert r.code == 2 and "has no SBOM" in r.err
    assert cli("diff", "--stack", "local").code == 2  # nothing promoted to compare with


# What a compromised image could report as package names and versions: Markdown that
# renders (headings, links, images, HTML, mentions, references, emphasis), the pipe and
# backticks that break a table, and terminal control sequences (OSC 52 clipboard write,
# BEL, erase-line, an 8-bit CSI, a bidi override).
HOSTILE = [
    ("# heading", "1.0"),
    ("[click](https://evil.example/x)", "![img](https://evil.example/p.png)"),
    ("<script>alert(1)</script>", "@acme/security-team"),
    ("a|b", "`tick` ``two``"),
    ("*em* _em_ \\escaped", "#1234 :rocket: www.evil.example"),
    ("clip\x1b]52;c;ZXZpbA==\x07board", "bell\x07\x1b[2K\r\x9b31mred\u202etxt"),
    ("multi\nline", "x)\n# injected heading"),
]


def _hostile_inventory(base: dict) -> dict:
    inv = json.loads(json.dumps(base))
    for name, version in HOSTILE:
        inv["dpkg"].append(
            {"name": name, "version": version, "source": "s", "source_version": "1",
             "arch": "amd64"}
        )  # fmt: skip
    return inv


def test_hostile_names_render_inert_in_markdown_and_the_terminal(
    env, cli, tmp_path, real_inventory
) -> None:
    from markdown_it import MarkdownIt

    first = _with_sbom(env, tmp_path, real_inventory, [], "clean", attest=False)
    hostile = _hostile_inventory(real_inventory)
    second = _with_sbom(env, tmp_path, hostile, [], "hostile", attest=False)

    md = cli("diff", str(first.id), str(second.id), "--format", "markdown")
    assert md.code == 0, md.err
    html = MarkdownIt("commonmark").enable("table").render(md.out)
    # one heading (ours), no link, image or HTML from the host
    assert html.count("<h") - html.count("<hr") == 1 and "<h3>" in html
    for tag in ("<a ", "<img", "<script", "<em>", "<strong>imagectl"):
        assert tag not in html, tag
    # each hostile value is one whole code span in a four-cell row (GitHub links no
    # mention, reference or emoji inside code)
    rows = [r for r in html.split("<tr>") if "<td>added</td>" in r]
    assert len(rows) == len(HOSTILE)
    for row in rows:
        assert row.count("<td>") == 4, row
    shown = {  # what each value reads as (sequences removed, HTML-escaped by the renderer)
        "clip\x1b]52;c;ZXZpbA==\x07board": "clipboard",
        "bell\x07\x1b[2K\r\x9b31mred\u202etxt": "bellredtxt",
        "multi\nline": "multi␤line",
        "x)\n# injected heading": "x)␤# injected heading",
        "<script>alert(1)</script>": "&lt;script&gt;alert(1)&lt;/script&gt;",
    }
    for name, version in HOSTILE:
        for value in (name, version):
            assert f"<code>{shown.get(value, value)}</code>" in html, value
    for control in ("\x1b", "\x07", "\x9b", "\r", "\u202e"):
        assert control not in md.out

    text = cli("diff", str(first.id), str(second.id))
    assert text.code == 0, text.err
    for control in ("\x1b", "\x07", "\x9b", "\r", "\u202e"):
        assert control not in text.out
    assert "+ clipboard " in text.out  # the OSC 52 string removed whole, the name kept
