"""One registry for every check: no code builds a ``CheckResult`` but the registry, every
check id the code or the data can put in a receipt is registered, and the docs' table
(``imagectl.validators.check_table.every_check``) lists each with its title and action."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from imagectl.validators.check_table import every_check
from imagectl.validators.collectives.arithmetic import OPS
from imagectl.validators.compute.gemm import DTYPES
from imagectl.validators.compute.recorded import LOAD_IDS
from imagectl.validators.coverage import requirements
from imagectl.validators.dcgm.table import tables
from imagectl.validators.registry import (
    REGISTRY,
    Runs,
    UnregisteredCheck,
    check_result,
    spec_of,
)
from imagectl.validators.results import Outcome

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(REPO / "pipeline").rglob("*.py"), *(REPO / "validators").rglob("*.py")])
REGISTRY_MODULE = REPO / "validators" / "registry.py"


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def hand_built(source: str) -> list[int]:
    """Lines that construct a ``CheckResult`` directly, or copy one under another id."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        if _name(node.func) in ("CheckResult", "model_construct") and (
            _name(node.func) == "CheckResult"
            or (isinstance(node.func, ast.Attribute) and _name(node.func.value) == "CheckResult")
        ):
            lines.append(node.lineno)
        if _name(node.func) == "model_copy":
            for kw in node.keywords:
                if kw.arg == "update" and isinstance(kw.value, ast.Dict):
                    keys = [k.value for k in kw.value.keys if isinstance(k, ast.Constant)]
                    if "id" in keys:
                        lines.append(node.lineno)
    return lines


def test_no_check_result_is_built_outside_the_registry() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in SOURCES
        if path != REGISTRY_MODULE
        for line in hand_built(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "build results with registry.check_result (or Spec.result): " + ", ".join(
        found
    )


def test_the_scan_finds_a_hand_built_result() -> None:
    assert hand_built("r = CheckResult(id='x', title='x', severity=s, outcome=o)\n") == [1]
    assert hand_built("r = results.CheckResult.model_construct(id='x')\n") == [1]
    assert hand_built("r = old.model_copy(update={'id': 'y'})\n") == [1]
    assert hand_built("r = old.model_copy(update={'message': 'y'})\n") == []
    assert hand_built("r = check_result(id='x', outcome=o)\n") == []


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "constant"`` (ids such as RUN_ID, CHECK_ID, TOOLKIT_ID)."""
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def named_ids(source: str) -> list[tuple[int, str, bool]]:
    """(line, id or id prefix, is_prefix) of every check id a result-making module names:
    the ``id=`` of its result calls and the ``"id"`` of the field dicts it spreads into
    them; an f-string id gives its literal prefix."""
    tree = ast.parse(source)
    names = _module_strings(tree)
    values: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in ("check_result", "result"):
            values += [kw.value for kw in node.keywords if kw.arg == "id"]
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "id" and value is not None:
                    values.append(value)
    out: list[tuple[int, str, bool]] = []
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.append((value.lineno, value.value, False))
        elif isinstance(value, ast.Name) and value.id in names:
            out.append((value.lineno, names[value.id], False))
        elif isinstance(value, ast.JoinedStr) and value.values:
            head = value.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                out.append((value.lineno, head.value, True))
    return out


def _registered(check_id: str, prefix: bool) -> bool:
    if prefix:
        return any(
            s.id.startswith(check_id) or check_id.startswith(s.id) for s in REGISTRY.values()
        )
    try:
        spec_of(check_id)
    except UnregisteredCheck:
        return False
    return True


def test_every_check_id_the_code_names_is_registered() -> None:
    missing, seen = [], 0
    for path in SOURCES:
        source = path.read_text(encoding="utf-8")
        if "check_result" not in source or path == REGISTRY_MODULE:
            continue
        for line, check_id, prefix in named_ids(source):
            seen += 1
            if not _registered(check_id, prefix):
                missing.append(f"{path.relative_to(REPO)}:{line} {check_id}{'*' if prefix else ''}")
    assert seen > 15, "the scan read the result-making modules"
    assert missing == []


def test_the_id_scan_reads_constants_names_and_fstrings() -> None:
    src = (
        "RUN_ID = 'dcgm.diag'\n"
        "a = check_result(id=RUN_ID)\n"
        "b = {'id': 'cuda.init', 'unit': 'ms'}\n"
        "c = check_result(id=f'cuda.gemm.{dtype}')\n"
    )
    assert sorted(named_ids(src)) == [
        (2, "dcgm.diag", False),
        (3, "cuda.init", False),
        (4, "cuda.gemm.", True),
    ]
    assert not _registered("cuda.gemm.fp8", False)
    assert _registered("cuda.gemm.fp32", False)


def receipt_ids() -> list[str]:
    """Every concrete check id a receipt can hold, from the data and the tables that make
    them: coverage's requirements, the GEMM types, the load checks, the collective ops (on
    one node and across nodes), the session's stages, and DCGM's tests."""
    ids: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            ids.update(v for v in node if isinstance(v, str) and "." in v)
            for value in node:
                walk(value)

    walk(requirements())
    ids.update(f"cuda.gemm.{d}" for d in DTYPES)
    ids.update(LOAD_IDS)
    ids.update(f"collective.{op}" for op in OPS)
    ids.update(f"fabric.collective.{op}" for op in OPS)
    ids.update({"compute.smoke", "collectives.smoke", "dcgm.diag", "validation.coverage"})
    ids.update(f"dcgm.{test.lower()}" for test in tables().titles)
    return sorted(ids)


def test_every_id_a_receipt_can_hold_is_registered() -> None:
    ids = receipt_ids()
    assert len(ids) > 40
    unregistered = [i for i in ids if not _registered(i, False)]
    assert unregistered == []


def test_an_unregistered_id_or_another_title_is_refused() -> None:
    with pytest.raises(UnregisteredCheck, match="cuda.gemm.fp8"):
        check_result(id="cuda.gemm.fp8", outcome=Outcome.PASS)
    with pytest.raises(UnregisteredCheck, match="title"):
        check_result(id="cuda.init", title="something else", outcome=Outcome.PASS)
    with pytest.raises(UnregisteredCheck):
        check_result(id="dcgm.", outcome=Outcome.PASS)  # a family's prefix is no member
    r = check_result(id="dcgm.memtest", title="Memtest", outcome=Outcome.PASS)
    assert (r.id, r.title) == ("dcgm.memtest", "Memtest")
    assert check_result(id="cuda.init", outcome=Outcome.SKIP).title == REGISTRY["cuda.init"].title


def test_the_table_lists_every_registered_check_with_title_and_action() -> None:
    rows = every_check()
    assert [r.id for r in rows] == list(REGISTRY)
    assert len({r.id for r in rows}) == len(rows)
    for row in rows:
        assert row.title.strip() and row.action is not None, row.id
        assert row.profiles, row.id
    runs = {r.runs for r in rows}
    assert runs == set(Runs), "every way a check runs has a check in the table"
    # the hand-judged checks of every stage are in it, beside the runner's
    for check_id in (
        "nvml.init",
        "cuda.init",
        "cuda.gemm.bf16",
        "load.clock_events",
        "dcgm.diag",
        "collective.all_reduce",
        "fabric.attribution",
        "validator.toolkit",
        "validation.coverage",
        "baseline.summary",
    ):
        assert check_id in REGISTRY, check_id
    families = {r.id: r for r in rows if r.is_family}
    assert set(families) == {"dcgm.", "baseline."}
    for row in families.values():
        assert row.members, row.id
        for member, title in row.members:
            assert spec_of(member).id in (row.id, member) and title.strip(), member
    # a DCGM test whose id is another check's would be refused when made: none is
    assert not [m for m, _ in families["dcgm."].members if m in REGISTRY]
