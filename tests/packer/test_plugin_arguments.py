"""Every Packer plugin is pinned to one version, and every argument the templates give a
builder or the ansible provisioner is one that version documents.

The documented arguments are a copy of each pinned plugin's generated documentation
(``tests/packer/data/plugin_arguments.json``: the repository, tag and commit read, and the
rule that read it). Debian's packer 1.6.6 has the builders built in; tests/packer's other
modules hold the templates to it (``packer validate``), this one to the current plugins,
which Packer only checks once ``packer init`` has installed them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from imagectl.clouds.registry import specs

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"
DOCS = json.loads((Path(__file__).with_name("data") / "plugin_arguments.json").read_text())
CLOUDS = sorted(s.name for s in specs().values())
EXACT = re.compile(r"^\d+\.\d+\.\d+$")
# the block of a `source`/`provisioner` and nested blocks, as HCL writes them
BLOCK_OPEN = re.compile(r'^\s*([a-z_][a-z0-9_-]*)\s*(?:"[^"]*"\s*)*\{\s*(?:#.*)?$')
ATTRIBUTE = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*=(?!=)")


def required_plugins(cloud: str) -> dict[str, tuple[str, str]]:
    """{name: (source, version)} of images/<cloud>/plugins.pkr.hcl."""
    text = (IMAGES / cloud / "plugins.pkr.hcl").read_text()
    found = re.findall(
        r'(\w+)\s*=\s*\{\s*source\s*=\s*"([^"]+)"\s*version\s*=\s*"([^"]+)"\s*\}', text
    )
    return {name: (source, version) for name, source, version in found}


def _depth(text: str) -> int:
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text.split("#", 1)[0])
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def arguments(text: str, kind: str, name: str) -> set[str]:
    """Every argument and nested block name inside ``<kind> "<name>" ... { }`` of an HCL
    text (a multi-line value, e.g. a map literal, is skipped as one attribute)."""
    lines = text.splitlines()
    head = re.compile(rf'^\s*{kind}\s+"{re.escape(name)}"(?:\s+"[^"]*")?\s*\{{')
    out: set[str] = set()
    for start, line in enumerate(lines):
        if not head.match(line):
            continue
        depth, i = 1, start + 1
        while i < len(lines) and depth > 0:
            current = lines[i]
            if current.strip() == "}":
                depth -= 1
            elif m := BLOCK_OPEN.match(current):
                out.add(m[1])
                depth += 1
            elif m := ATTRIBUTE.match(current):
                out.add(m[1])
                open_ = _depth(current)
                while open_ > 0 and i + 1 < len(lines):  # the rest of a multi-line value
                    i += 1
                    open_ += _depth(lines[i])
            i += 1
    return out


def test_the_reader_finds_arguments_and_nested_blocks_only():
    text = """
source "amazon-ebs" "candidate" {
  region = var.r
  tags = {
    Name = "x"
  }
  run_tags = merge(var.t, { Stack = "y" })
  launch_block_device_mappings {
    volume_size = 8
  }
  # plugins-only: begin
  imds_support = "v2.0"
}
source "other" "x" {
  not_this = 1
}
"""
    assert arguments(text, "source", "amazon-ebs") == {
        "region", "tags", "run_tags", "launch_block_device_mappings", "volume_size",
        "imds_support",
    }  # fmt: skip


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_plugin_is_pinned_to_one_documented_version(cloud: str):
    plugins = required_plugins(cloud)
    assert plugins, f"images/{cloud}/plugins.pkr.hcl names no plugin"
    for name, (source, version) in plugins.items():
        assert EXACT.match(version), f"images/{cloud}: plugin {name} version {version!r} is a range"
        documented = [d for d in DOCS.values() if isinstance(d, dict) and d["plugin"] == source]
        assert documented, f"no documentation copied for {source}"
        assert {d["version"] for d in documented} == {version}, (
            f"images/{cloud} pins {source} {version}; tests/packer/data/plugin_arguments.json "
            f"documents {sorted(d['version'] for d in documented)}: copy the new version's docs"
        )


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_builder_argument_is_documented_by_the_pinned_plugin(cloud: str):
    spec = next(s for s in specs().values() if s.name == cloud)
    docs = DOCS[f"builder {spec.packer_builder}"]
    text = "\n".join(p.read_text() for p in sorted((IMAGES / cloud).glob("*.pkr.hcl")))
    used = arguments(text, "source", spec.packer_builder)
    assert len(used) > 5, f"read no source block for {spec.packer_builder} in images/{cloud}"
    unknown = sorted(used - set(docs["arguments"]))
    assert unknown == [], (
        f"images/{cloud}: {spec.packer_builder} arguments not in {docs['plugin']} "
        f"{docs['version']}'s documentation: {unknown}"
    )


def test_every_ansible_provisioner_argument_is_documented():
    docs = DOCS["provisioner ansible"]
    text = (IMAGES / "common" / "build.pkr.hcl.tmpl").read_text()
    used = arguments(text, "provisioner", "ansible")
    assert {"playbook_file", "extra_arguments", "use_proxy"} <= used
    assert sorted(used - set(docs["arguments"])) == []


def test_a_misspelt_argument_is_caught():
    docs = set(DOCS["builder amazon-ebs"]["arguments"])
    text = (IMAGES / "aws" / "candidate.pkr.hcl").read_text().replace("imds_support", "imds_suport")
    assert "imds_suport" in arguments(text, "source", "amazon-ebs") - docs
