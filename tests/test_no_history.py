"""The code says what it is for, not which work item brought it: no "issue 47" or "issue 46,
item 1" in any tracked file. Work items live in the tracker and the commit log; a reader of
the code or the docs has neither. A citation of an upstream project's issue or pull request
(``NVIDIA/cuda-repo-management issue #39``, a URL) is a source and stays."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# "issue 47", "Issue #16", "issues 28-31", "PR 12" ...
WORK_ITEM = re.compile(r"\b(issues?|PR)\s?#?\d{1,4}\b", re.IGNORECASE)
# ... unless it names the upstream repository it belongs to: "owner/repo issue #39"
UPSTREAM = re.compile(r"[\w.-]+/[\w.-]+,? $")
BINARY = {".gz", ".png", ".whl", ".xz", ".zst", ".tar"}


def _tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [REPO / name for name in out.split("\0") if name]


def mentions(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        for m in WORK_ITEM.finditer(line):
            if not UPSTREAM.search(line[: m.start()]):
                found.append(line.strip())
    return found


def test_the_rule_tells_a_work_item_from_a_source() -> None:
    assert mentions("a canary pointer beside latest (issue 47): what a fleet deploys")
    assert mentions('"""Fault classes of Issue #16, item 3."""')
    assert mentions("# see PR 12")
    assert not mentions("(NVIDIA/cuda-repo-management issue #39)")
    assert not mentions("modal-labs/modal-client PR 2797 (nvidia-smi totals)")
    assert not mentions("https://github.com/NVIDIA/nccl/issues/1026")
    assert not mentions("an interrupt issue with the GPU, 8 GPUs")


def test_no_tracked_file_names_a_work_item() -> None:
    found = {}
    for path in _tracked():
        if path.suffix in BINARY or not path.is_file() or path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if hits := mentions(text):
            found[str(path.relative_to(REPO))] = hits[:3]
    assert not found, "say what the code is for, not which issue brought it:\n" + "\n".join(
        f"{name}: {hits}" for name, hits in sorted(found.items())
    )
