"""``--dist loadgroup`` on pytest 9.2: the ``@group`` suffix where pytest reads node ids.

pytest-xdist 3.8 groups tests by appending ``@<xdist_group>`` to each item's node id on
the worker (``item._nodeid``); pytest 9.2 keeps node ids as a structured ``NodeId`` in
``item._id`` and no longer reads ``_nodeid``, so the suffix is lost and grouped tests are
spread as if unmarked (pytest-dev/pytest-xdist#1386). This hook, after xdist's, writes
the suffix where the running pytest reads it (what pytest-dev/pytest-xdist#1388
proposes); where xdist's own suffix took effect it does nothing. The e2e session needs it:
its "local" group builds in one state folder, two of its tests at once see each other's
build. Drop it once a pytest-xdist release has #1388.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2
    except ImportError:
        return  # older pytest reads _nodeid: xdist's suffix is in place
    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
             for m in item.iter_markers("xdist_group")}
        )  # fmt: skip
        suffix = f"@{'_'.join(names)}"
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(f"{item.nodeid}{suffix}")
