"""A pip too old for the lock resolver gets a hint that says what to install.

pip before 23.3 refuses ``--platform`` with ``--dry-run`` (pip's cmdoptions.py,
``check_dist_restriction``; 23.3 added "or using '--dry-run'" to the message and let it
through). A fresh ``python3 -m venv`` on Python 3.11.7 bundles pip 23.2.1, so a venv made
without validators/installer.lock's pip failed every lock test with the generic hint.
"""

from __future__ import annotations

from imagectl.supply.resolve import _hint

# pip 23.2.1's message, word for word (src/pip/_internal/cli/cmdoptions.py)
PIP_23_2 = (
    "ERROR: Can not use any platform or abi specific options unless installing via '--target'"
)
# pip 23.3 and later (it is only raised without --dry-run, which the resolver always passes)
PIP_23_3 = (
    "ERROR: Can not use any platform or abi specific options unless installing via "
    "'--target' or using '--dry-run'"
)


def test_an_old_pip_is_named_with_what_to_install() -> None:
    hint = _hint(PIP_23_2)
    assert "predates 23.3" in hint and "validators/installer.lock" in hint


def test_other_failures_keep_the_index_hint() -> None:
    for stderr in (PIP_23_3, "ERROR: No matching distribution found for torch==9"):
        assert "predates" not in _hint(stderr)
        assert "check the index" in _hint(stderr)
