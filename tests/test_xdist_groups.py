"""The e2e session's two groups (tests/embedded/conftest.py) each run on one worker: the
"local" group builds in the session's state folder, and two of its tests at once on two
workers see each other's build (a Ctrl-C test found the other's chroot Ansible alive).
pytest 9.2 with pytest-xdist 3.8 silently stopped grouping (pytest-dev/pytest-xdist#1386;
tests/xdist_groups.py puts the groups back): this runs xdist as `make e2e` does, with that
plugin as tests/conftest.py loads it, on a sample and reads which worker ran what."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.support import ROOT

SAMPLE = """
import os, time, pytest
pytestmark = pytest.mark.xdist_group("{group}")
@pytest.mark.parametrize("i", range(3))
def test_{name}(i):
    time.sleep(0.05)
    with open(os.path.join(os.environ["SAMPLE_OUT"], os.environ["PYTEST_XDIST_WORKER"]), "a") as f:
        f.write("{group}\\n")
"""


def test_loadgroup_runs_each_group_on_one_worker(tmp_path: Path) -> None:
    for name, group in (("a", "local"), ("b", "local"), ("c", "clouds"), ("d", "clouds")):
        (tmp_path / f"test_{name}.py").write_text(SAMPLE.format(group=group, name=name))
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-p", "tests.xdist_groups", "--rootdir", str(tmp_path),
         "-c", "/dev/null", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "SAMPLE_OUT": str(out), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for file in out.iterdir():
        for group in file.read_text().split():
            workers[group].add(file.name)
    assert sorted(workers) == ["clouds", "local"]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
