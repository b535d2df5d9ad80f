"""Every threshold says where it comes from: NVIDIA where NVIDIA sets it, else imagectl
policy with its reason; docs/validator-thresholds.md lists them all, generated from the
data (``python -m tests.docs.pages``; a stale table fails here)."""

from __future__ import annotations

import re

from imagectl.validators.catalogs import AUTHORITIES, thresholds
from tests.docs.pages import DOCS, block

NVIDIA_SOURCE = re.compile(r"NVIDIA|NVML|DCGM")
PAGE = DOCS / "validator-thresholds.md"


def test_every_threshold_names_its_authority() -> None:
    for t in thresholds().values.values():
        assert t.authority in AUTHORITIES, t.key
        assert t.source.strip(), t.key
        if t.authority == "nvidia":
            assert NVIDIA_SOURCE.search(t.source), f"{t.key}: an NVIDIA threshold cites NVIDIA"
        else:
            assert t.reason.strip(), f"{t.key}: imagectl policy says why"


def test_numbers_from_other_tools_are_policy() -> None:
    """A number taken from Azure's health checks (AzHC) is imagectl policy, not NVIDIA's."""
    for t in thresholds().values.values():
        if "azurehpc-health-checks" in t.source and not NVIDIA_SOURCE.search(t.source):
            assert t.authority == "imagectl", t.key


def test_the_docs_table_is_generated_from_the_data() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert block("thresholds") in text, (
        "docs/validator-thresholds.md's thresholds table is stale: run python -m tests.docs.pages"
    )
    for key in thresholds().values:
        assert f"`{key}`" in text
