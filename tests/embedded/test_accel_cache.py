"""The KVM probe's answer is cached per host boot and kernel content, in the user's cache
folder: another state folder, or a base that holds the same kernel at another path,
reuses it (no second 20 s probe, which burns a core throughout when KVM hangs); another
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
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("IMAGECTL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _cache(cache: Path, kernel: Path, boot_id: str | None = None) -> None:
    key = accel.cache_key(kernel)
    if boot_id is not None:
        key["boot_id"] = boot_id
    choice = {"name": "tcg", "reason": "TCG emulation: seeded", "probe_s": 20.0}
    (cache / "local").mkdir(parents=True, exist_ok=True)
    (cache / "local" / "accel.json").write_text(json.dumps({"key": key, "choice": choice}))


def test_the_same_kernel_elsewhere_reuses_the_answer(cache: Path, tmp_path: Path) -> None:
    first = _kernel(tmp_path / "a" / "base" / "k1", b"kernel image bytes")
    _cache(cache, first)
    moved = _kernel(tmp_path / "b" / "base" / "k1", b"kernel image bytes")
    with Children() as children:
        choice = accel.choose_accel("auto", moved, children, timeout=0.1)
    assert (choice.name, choice.probe_s) == ("tcg", 0.0)
    assert choice.reason == "TCG emulation: seeded (probed earlier this boot)"


def test_another_state_folder_reuses_the_probe(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe made from one state folder answers a run in another (the e2e session's
    first run and every `make run` in a fresh folder): a real probe, cut short, then none."""
    kernel = _kernel(tmp_path / "k", b"not a kernel")
    with Children() as children:
        probed = accel.choose_accel("auto", kernel, children, timeout=0.5)
    assert probed.probe_s > 0 and "probed earlier" not in probed.reason
    assert not (tmp_path / "state" / "local" / "accel.json").exists()  # not per state
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(tmp_path / "another-state"))
    with Children() as children:
        again = accel.choose_accel("auto", kernel, children, timeout=0.5)
    assert (again.name, again.probe_s) == (probed.name, 0.0)
    assert again.reason == f"{probed.reason} (probed earlier this boot)"


@pytest.mark.parametrize("stale", ["other kernel", "other boot"])
def test_another_kernel_or_boot_is_probed_again(cache: Path, tmp_path: Path, stale: str) -> None:
    cached = _kernel(tmp_path / "a", b"kernel image bytes")
    _cache(cache, cached, boot_id="an-earlier-boot" if stale == "other boot" else None)
    kernel = cached if stale == "other boot" else _kernel(tmp_path / "b", b"another kernel")
    with Children() as children:  # a real probe, cut short: not a kernel, no banner
        choice = accel.choose_accel("auto", kernel, children, timeout=0.5)
    assert "probed earlier" not in choice.reason and "seeded" not in choice.reason, choice
    assert choice.name == "tcg"
    written = json.loads((cache / "local" / "accel.json").read_text())
    assert written["key"] == accel.cache_key(kernel)
    assert written["choice"]["reason"] == choice.reason
