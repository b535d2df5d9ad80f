"""Tab completion: ``--stack``, ``--shape``, ``--gpu`` and catalog
image ids, through click's own completion machinery (what ``_IMAGECTL_COMPLETE`` runs),
on every command that takes them."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.shell_completion import ShellComplete

from imagectl.catalog import repository as repo
from imagectl.catalog.db import open_catalog
from imagectl.cli import cli
from tests.cli.commands import every_command
from tests.support import flat

COMPLETED = {"stack": "complete", "shape": "complete", "gpu": "complete", "gpus": "complete"}
IMAGE_ARGS = ("image", "image_id", "images")


def _complete(args: list[str], incomplete: str) -> list[str]:
    shell = ShellComplete(cli, {}, "imagectl", "_IMAGECTL_COMPLETE")
    return [item.value for item in shell.get_completions(args, incomplete)]


def test_every_stack_shape_gpu_option_and_image_argument_completes() -> None:
    missing, seen = [], 0
    for name, cmd in every_command():
        for param in cmd.params:
            wanted = (isinstance(param, click.Option) and param.name in COMPLETED) or (
                isinstance(param, click.Argument) and param.name in IMAGE_ARGS
            )
            if not wanted:
                continue
            seen += 1
            if param._custom_shell_complete is None:  # type: ignore[attr-defined]
                missing.append(f"{name} {param.name}")
    assert seen >= 25
    assert missing == []


def test_stacks() -> None:
    assert _complete(["promote", "--stack"], "h1") == ["h100-training"]
    assert "local" in _complete(["status", "--stack"], "")


def test_shapes_and_gpus() -> None:
    assert _complete(["validate", "--shape"], "p5") == ["p5.48xlarge", "p5e.48xlarge",
                                                        "p5en.48xlarge"]  # fmt: skip
    assert "a3-megagpu-8g" in _complete(["validate-image", "x", "--shape"], "a3")
    assert "H100-SXM-80GB" in _complete(["validate", "--gpu"], "h100")
    assert "H200-SXM-141GB" in _complete(["compat", "check", "--gpu"], "H2")


def test_catalog_image_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", url)
    assert _complete(["promote"], "ami-") == []  # no catalog yet: nothing, and none made
    assert not (tmp_path / "catalog.db").exists()
    catalog = open_catalog(url)
    with catalog.transaction() as s:
        for ident in ("ami-0aaa", "ami-0bbb"):
            repo.record_image(s, cloud_image_id=ident, region="us-east-1", cloud="aws",
                              stack="h100-training", stack_digest="sha256:01")  # fmt: skip
    catalog.close()
    assert _complete(["promote"], "ami-") == ["ami-0bbb", "ami-0aaa"]  # newest first
    assert _complete(["verify"], "ami-0a") == ["ami-0aaa"]
    assert _complete(["diff", "ami-0aaa"], "ami-0b") == ["ami-0bbb"]
    assert _complete(["validate-image"], "ami-0b") == ["ami-0bbb"]


def test_a_broken_catalog_completes_nothing(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "catalog.db"
    bad.write_text("not a database")
    monkeypatch.setenv("IMAGECTL_DATABASE_URL", f"sqlite:///{bad}")
    assert _complete(["promote"], "") == []


def test_the_installed_entry_point_completes_in_bash(tmp_path: Path) -> None:
    """What docs/environment.md's `eval "$(_IMAGECTL_COMPLETE=bash_source imagectl)"` runs."""
    import os
    import subprocess
    import sys

    imagectl = str(Path(sys.executable).parent / "imagectl")
    env = {**os.environ, "COMP_WORDS": "imagectl validate --shape g6", "COMP_CWORD": "3",
           "_IMAGECTL_COMPLETE": "bash_complete", "IMAGECTL_STATE_DIR": str(tmp_path)}  # fmt: skip
    out = subprocess.run([imagectl], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == [
        "plain,g6.12xlarge",
        "plain,g6.48xlarge",
        "plain,g6.xlarge",
    ]
    script = subprocess.run(
        [imagectl], env={**os.environ, "_IMAGECTL_COMPLETE": "bash_source"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "_imagectl_completion" in flat(script.stdout)
