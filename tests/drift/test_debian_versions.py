"""Debian version order against dpkg itself: ``dpkg --compare-versions`` is the oracle for a
few thousand generated pairs (epochs, tildes, letters against digits, leading zeros,
revisions), plus the cases the old sort key got wrong."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from imagectl.core.versions import debian_version_key
from imagectl.drift.receipts import upstream
from tests.support import require_tool

CHARS = "0123456789abz.+~"


def _part(rng: random.Random, first: str) -> str:
    return rng.choice(first) + "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 6)))


def _version(rng: random.Random) -> str:
    epoch = f"{rng.randint(0, 2)}:" if rng.random() < 0.2 else ""
    upstream = _part(rng, "0123456789")
    revision = f"-{_part(rng, '0123456789abz')}" if rng.random() < 0.6 else ""
    return epoch + upstream + revision


def _valid(v: str) -> bool:
    """dpkg's syntax: [epoch:]upstream[-revision], upstream starting with a digit."""
    epoch, colon, rest = v.rpartition(":")
    if colon and not epoch.isdigit():
        return False
    upstream = rest.rpartition("-")[0] if "-" in rest else rest
    return bool(upstream) and upstream[0].isdigit() and not rest.endswith("-")


def _pairs(n: int) -> list[tuple[str, str]]:
    rng = random.Random(20261123)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        a = _version(rng)
        # half the pairs share a prefix, so the comparison reaches the interesting part
        prefix = a[: rng.randint(1, len(a))] if rng.random() < 0.5 else ""
        b = prefix + _part(rng, CHARS) if prefix else _version(rng)
        if _valid(a) and _valid(b):
            pairs.append((a, b))
    return pairs


def _dpkg_order(pairs: list[tuple[str, str]]) -> list[int]:
    """-1, 0 or 1 per pair, from dpkg (one shell, one dpkg call per relation)."""
    script = "\n".join(
        f"if dpkg --compare-versions '{a}' lt '{b}'; then echo -1; "
        f"elif dpkg --compare-versions '{a}' eq '{b}'; then echo 0; else echo 1; fi"
        for a, b in pairs
    )
    out = subprocess.run(["sh"], input=script, capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def _ours(a: str, b: str) -> int:
    ka, kb = debian_version_key(a), debian_version_key(b)
    return -1 if ka < kb else 0 if ka == kb else 1


def test_matches_dpkg_on_generated_pairs() -> None:
    require_tool("dpkg")
    assert shutil.which("sh")
    pairs = _pairs(2500)
    expected = _dpkg_order(pairs)
    wrong = [(a, b, e, _ours(a, b)) for (a, b), e in zip(pairs, expected, strict=True)
             if _ours(a, b) != e]  # fmt: skip
    assert not wrong, f"{len(wrong)} pairs differ from dpkg, e.g. {wrong[:5]}"


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [
        ("1a1", "11", -1),  # digits compare numerically: 1 < 11
        ("1.0a1", "1.01", -1),  # leading zeros skipped: 1.0a1 reads as 1.a1 against 1.1
        ("1.a", "1.", 1),  # a letter sorts after the end
        ("1.0~rc1", "1.0", -1),  # ~ sorts before the end
        ("1.0", "1.00", 0),  # leading zeros do not count
        ("1:0.1", "9.9", 1),  # the epoch wins
        ("580.95.05-0ubuntu1", "580.95.05-1", -1),
        ("2.26.2-1+cuda12.8", "2.26.2-1+cuda12.9", -1),
    ],
)
def test_known_orders(a: str, b: str, order: int) -> None:
    assert _ours(a, b) == order
    assert hash(debian_version_key(a)) == hash(debian_version_key(b)) or order != 0


@pytest.mark.parametrize(
    ("package_version", "upstream_part"),
    [
        # Debian Policy 5.6.12: the revision is what follows the LAST hyphen; an upstream
        # version may itself hold hyphens when a revision is present.
        ("1:580.95.05-0ubuntu1", "580.95.05"),
        ("2.26.2-1+cuda12.8", "2.26.2"),
        ("4.1.0-rc1-1", "4.1.0-rc1"),
        ("580.95.05", "580.95.05"),
    ],
)
def test_host_drift_compares_the_upstream_part_as_debian_policy_defines_it(
    package_version: str, upstream_part: str
) -> None:
    assert upstream(package_version) == upstream_part
