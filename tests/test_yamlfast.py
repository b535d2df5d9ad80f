"""The data files read through imagectl.core.yamlfast (libyaml, YAML 1.1) read the same as
through ruamel's safe loader (YAML 1.2), which read them before: the two disagree on
``yes``/``no``/``on``/``off`` (booleans in 1.1 only), ``0777`` (octal in 1.1), ``1:20``
(sexagesimal in 1.1) and ``1_000``. A catalog entry written with one of these would
change meaning silently when the loader changed (https://yaml.org/spec/1.2.2/ext/changes/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from imagectl.core import yamlfast
from imagectl.core.errors import UserError

REPO = Path(__file__).resolve().parents[1]
READ_FAST = sorted(
    [
        *(REPO / "validators").rglob("*.yaml"),
        *(REPO / "pipeline").rglob("*.yaml"),
        *(REPO / "images" / "catalog").rglob("*.yaml"),
        *(REPO / "images" / "compat").rglob("*.yaml"),
    ]
)


def test_there_are_data_files_to_compare() -> None:
    names = {p.name for p in READ_FAST}
    assert {"shapes.yaml", "check_classes.yaml"} <= names, names


@pytest.mark.parametrize("path", READ_FAST, ids=lambda p: str(p.relative_to(REPO)))
def test_libyaml_reads_what_ruamel_read(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert yamlfast.loads(text) == YAML(typ="safe", pure=True).load(text)


@pytest.mark.parametrize(
    ("text", "yaml11"),
    [("a: yes", True), ("a: off", False), ("a: 0777", 511), ("a: 1:20", 80)],
)
def test_the_differences_the_comparison_guards_against_are_real(text: str, yaml11: object) -> None:
    assert yamlfast.loads(text)["a"] == yaml11
    assert YAML(typ="safe", pure=True).load(text)["a"] != yaml11


def test_a_malformed_file_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [2\nc: 3\n")
    with pytest.raises(UserError) as err:
        yamlfast.load_data(bad)
    assert f"{bad}:" in str(err.value.where) or f"{bad}:" in str(err.value)
