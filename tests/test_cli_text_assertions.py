"""No assertion on a command's text depends on where a console wrapped it.

A console wraps a message at its width, so whether two words of it sit on one line
depends on that width and on the length of every path printed before them (pytest's
temporary folders: ``/tmp/pytest-of-root/pytest-0/popen-gw0/...`` on a fresh machine,
longer under a long ``TMPDIR``). ``"the folder" in r.err`` on raw text passed alone and
failed under xdist on a fresh machine. So every text assertion compares flattened text
(``tests.support.flat``): the ``cli`` fixture's ``out``/``err`` are ``CliText``, whose
``in`` flattens both sides, and raw process output is compared as ``"..." in
flat(proc.stderr)``.

- ``test_every_text_assertion_is_flattened`` reads every test module and finds each ``in``
  / ``not in`` of a string on a command's output (a process's ``stdout``/``stderr``/
  ``output``, a ``cli`` result's ``out``/``err``, ``capsys.readouterr()``'s): each must be
  on flattened text. It finds ``"the folder" in r.err`` of
  ``test_files_others_can_write_are_refused`` and fails it where ``CliResult`` holds plain
  ``str`` (as before).
- ``test_a_wrapped_refusal_reads_the_same_at_every_width``: the refusal behind that test at
  60, 80 and 200 columns and several path lengths: the raw lines differ, the flattened
  text and every assertion on it do not.
- ``test_text_modules_pass_narrow_and_under_a_long_temporary_folder``: the modules whose
  assertions are on wrapped refusals pass at 60 columns with a 120-character temporary
  folder (the suite itself runs at 200 with the machine's).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from tests.support import REPO, CliResult, CliText, flat

TESTS = REPO / "tests"
RAW = {"stdout", "stderr", "output"}  # subprocess.CompletedProcess, click's Result
CLI = {"out", "err"}  # CliResult, and capsys.readouterr()'s CaptureResult
SAFE_CALLS = {"flat", "CliText"}


@dataclass(frozen=True)
class Assertion:
    where: str  # path:line
    function: str
    needle: str
    operand: str
    flattened: bool


def _needle(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _printed(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in RAW
    if isinstance(node, ast.BinOp):
        return _printed(node.left) or _printed(node.right)
    return False


def _is_readouterr(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "readouterr"
    )


class _Scan(ast.NodeVisitor):
    """Each text assertion of one module, with the names each function bound to
    ``capsys.readouterr()`` (or to its ``out``/``err``): those hold plain ``str``."""

    def __init__(self, path: Path) -> None:
        self.path, self.function = path, "<module>"
        self.found: list[Assertion] = []
        self.captured: set[str] = set()  # names bound to readouterr() or its fields
        self.returns_raw: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer, self.function = (self.function, set(self.captured)), node.name
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and self._from_capture(sub.value):
                for target in sub.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.captured.add(name.id)
        self.generic_visit(node)
        self.function, self.captured = outer[0], outer[1]

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _from_capture(self, value: ast.expr) -> bool:
        """``capsys.readouterr()`` (or its fields), or a process's text as printed
        (``out = proc.stdout + proc.stderr``): a name bound to it holds plain text."""
        if _is_readouterr(value) or _printed(value):
            return True
        return (
            isinstance(value, ast.Attribute) and value.attr in CLI and _is_readouterr(value.value)
        )

    def _raw(self, node: ast.expr) -> bool:
        """Whether ``node`` is a command's text as it was printed (not flattened)."""
        if isinstance(node, ast.Call):
            return False  # flat(...), CliText(...), str.join and the like decide themselves
        if isinstance(node, ast.BinOp):
            return self._raw(node.left) or self._raw(node.right)
        if isinstance(node, ast.Subscript):
            return self._raw(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.captured
        if isinstance(node, ast.Attribute):
            if node.attr in RAW:
                return True
            if node.attr in CLI:
                base = node.value
                captured = _is_readouterr(base) or (
                    isinstance(base, ast.Name) and base.id in self.captured
                )
                return captured or not _cli_text_fields()
        return False

    def _output(self, node: ast.expr) -> bool:
        """Whether ``node`` is a command's output at all (flattened or not)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id in SAFE_CALLS or node.func.id == "_flat"
        if isinstance(node, ast.Attribute):
            return node.attr in RAW | CLI
        if isinstance(node, ast.BinOp):
            return self._output(node.left) or self._output(node.right)
        if isinstance(node, ast.Subscript):
            return self._output(node.value)
        return isinstance(node, ast.Name) and node.id in self.captured

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            needle, operand = _needle(node.left), node.comparators[0]
            if needle is not None and self._output(operand):
                self.found.append(
                    Assertion(
                        f"{self.path.relative_to(REPO)}:{node.lineno}", self.function, needle,
                        ast.unparse(operand), not self._raw(operand),
                    )
                )  # fmt: skip
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        # a helper handing a test capsys's plain text: the test's `in` would be raw
        if node.value is not None and self._raw_capture(node.value):
            self.returns_raw.append(f"{self.path.relative_to(REPO)}:{node.lineno}")
        self.generic_visit(node)

    def _raw_capture(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Tuple):
            return any(self._raw_capture(e) for e in node.elts)
        if isinstance(node, ast.Name):
            return node.id in self.captured
        return (
            isinstance(node, ast.Attribute) and node.attr in CLI and self._raw_capture(node.value)
        )


def _cli_text_fields() -> bool:
    """Whether the ``cli`` fixture's results hold ``CliText`` (flattening ``in``)."""
    hints = typing.get_type_hints(CliResult)
    return hints.get("out") is CliText and hints.get("err") is CliText


def _scan() -> tuple[list[Assertion], list[str]]:
    found: list[Assertion] = []
    returns: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        scan = _Scan(path)
        scan.visit(ast.parse(path.read_text(), filename=str(path)))
        found += scan.found
        returns += scan.returns_raw
    return found, returns


def test_every_text_assertion_is_flattened() -> None:
    found, raw_returns = _scan()
    # the class is real: the scan sees the assertions it is about, the one that failed on
    # a fresh machine among them
    assert len(found) > 150, len(found)
    named = [
        a for a in found
        if a.function == "test_files_others_can_write_are_refused" and a.needle == "the folder"
    ]  # fmt: skip
    assert named, "the scan no longer sees the assertion that failed on a fresh machine"
    raw = [
        f"{a.where} ({a.function}): {a.needle!r} in {a.operand}" for a in found if not a.flattened
    ]
    assert not raw, (
        "text assertions on a command's output as printed (its wrapping decides them): "
        "compare `... in flat(text)`, or run the command through the `cli` fixture:\n"
        + "\n".join(raw)
    )
    assert not raw_returns, (
        "helpers returning capsys's plain text (wrap it in CliText): " + ", ".join(raw_returns)
    )


def test_cli_text_compares_as_a_reader_reads() -> None:
    """``CliText``'s ``in``: line breaks and colour are not there for it; a needle with a
    line break still asks about the layout."""
    text = CliText("error: the trust file /tmp/a is refused: /tmp (the\nfolder of /tmp/a)")
    assert "the folder of /tmp/a" in text and "the folder" not in str(text)
    assert "the  folder" in text  # runs of spaces are one space on both sides
    assert "the\nfolder" in text and "folder\nof" not in text  # layout asked, layout compared
    assert "folder of /tmp/b" not in text
    assert "is refused" in CliText("\x1b[1;31mis\x1b[0m\n  refused")  # colour and indent
    assert flat("  a\n\tb  ") == "a b"


def _refusal(
    tmp_path: Path, padding: int, columns: int, cli, monkeypatch: pytest.MonkeyPatch
) -> CliResult:
    """``imagectl verify`` of a good envelope whose trust file sits in a folder others can
    write (``test_files_others_can_write_are_refused``'s case), ``padding`` characters
    deeper, at ``columns``."""
    from imagectl.provenance.keys import trust_document
    from tests.provenance.statements import IMAGE, signed_envelope

    folder = tmp_path / f"{padding}{'p' * padding}" / "in"
    envelope = signed_envelope(SIGNER, folder)
    trust = folder / "trust.json"
    trust.write_text(trust_document([SIGNER.public_key]))
    folder.chmod(0o777)
    monkeypatch.setenv("COLUMNS", str(columns))
    try:
        return cli("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope), "--trust",
                   str(trust))  # fmt: skip
    finally:
        folder.chmod(0o755)


def test_a_wrapped_refusal_reads_the_same_at_every_width(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = set()
    for columns in (60, 80, 200):
        for padding in (0, 7, 23, 41, 90):
            r = _refusal(tmp_path / f"w{columns}", padding, columns, cli, monkeypatch)
            assert r.code == 2, r.err
            # test_files_others_can_write_are_refused's assertions, on CliText
            assert "the folder" in r.err and "0777" in r.err and "is refused" in r.err
            assert "Traceback" not in r.err
            texts.add(flat(r.err).replace(str(tmp_path / f"w{columns}"), "<tmp>"))
    # one paragraph per path, whatever the width it was laid out at (the paths differ
    # only in their padding, which the replace above leaves: one text per padding)
    assert len(texts) == 5, texts


SIGNER = CryptoSigner.generate_ed25519()
MODULES = ("tests/provenance/test_trust_anchor.py", "tests/stacks/test_lint_outside_workspace.py")


def test_text_modules_pass_narrow_and_under_a_long_temporary_folder(tmp_path: Path) -> None:
    """The refusal-text modules at 60 columns with a 120-character basetemp (pytest's
    tmp_path under it), in a pytest of their own."""
    base = tmp_path / ("long-" + "t" * 200)
    base = Path(str(base)[: max(120, len(str(tmp_path)) + 10)])
    env = {**os.environ, "IMAGECTL_TEST_COLUMNS": "60"}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         f"--basetemp={base}", *MODULES],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in flat(proc.stdout) and " failed" not in flat(proc.stdout)
