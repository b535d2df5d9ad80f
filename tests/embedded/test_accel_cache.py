"""The KVM probe's answer is cached per host boot and kernel content: a state folder whose
base holds the same kernel at another path reuses it (no second 20 s probe); another
kernel, or a cache written in another boot, probes again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagectl.embedded import accel
from imagectl.embedded.procs import Children


def _kernel(folder: Path, content: bytes) -> Path:
    folder.mkdir(parents=True)
    path = folder / "vmlinuz"
    path.write_bytes(content)
    return path


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _cache(state: Path, kernel: Path, boot_id: str | None = None) -> None:
    key = accel.cache_key(kernel)
    if boot_id is not None:
        key["boot_id"] = boot_id
    choice = {"name": "tcg", "reason": "TCG emulation: seeded", "probe_s": 20.0}
    (state / "local").mkdir(parents=True, exist_ok=True)
    (state / "local" / "accel.json").write_text(json.dumps({"key": key, "choice": choice}))


def test_the_same_kernel_elsewhere_reuses_the_answer(state: Path, tmp_path: Path) -> None:
    first = _kernel(tmp_path / "a" / "base" / "k1", b"kernel image bytes")
    _cache(state, first)
    moved = _kernel(tmp_path / "b" / "base" / "k1", b"kernel image bytes")
    with Children() as children:
        choice = accel.choose_accel("auto", moved, children, timeout=0.1)
    assert (choice.name, choice.probe_s) == ("tcg", 0.0)
    assert choice.reason == "TCG emulation: seeded (probed earlier this boot)"


@pytest.mark.parametrize("stale", ["other kernel", "other boot"])
def test_another_kernel_or_boot_is_probed_again(state: Path, tmp_path: Path, stale: str) -> None:
    cached = _kernel(tmp_path / "a", b"kernel image bytes")
    _cache(state, cached, boot_id="an-earlier-boot" if stale == "other boot" else None)
    kernel = cached if stale == "other boot" else _kernel(tmp_path / "b", b"another kernel")
    with Children() as children:  # a real probe, cut short: not a kernel, no banner
        choice = accel.choose_accel("auto", kernel, children, timeout=0.5)
    assert "probed earlier" not in choice.reason and "seeded" not in choice.reason, choice
    assert choice.name == "tcg"
    written = json.loads((state / "local" / "accel.json").read_text())
    assert written["key"] == accel.cache_key(kernel)
    assert written["choice"]["reason"] == choice.reason
