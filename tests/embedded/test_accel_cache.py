"""The KVM probe's answer is cached per host boot and kernel content, in the user's cache
folder: another state folder, or a base that holds the same kernel at another path,
reuses it (no second 20 s probe, which burns a core throughout when KVM hangs); another
kernel, or a cache written in another boot, probes again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagectl.core.errors import UserError
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


def test_kvm_requested_is_probed_and_refused_where_it_does_not_boot(
    cache: Path, tmp_path: Path
) -> None:
    """``--accel kvm`` is held to the same probe as ``auto`` (and its cache): where KVM
    does not boot the kernel, exit 2 naming why and the options that work, before any VM of
    the run starts; before, it was taken as given and the guest could hang silently on a
    paravirtual KVM until the boot timed out."""
    kernel = _kernel(tmp_path / "k", b"not a kernel: KVM can never print its banner")
    with Children() as children:
        auto = accel.choose_accel("auto", kernel, children, timeout=0.5)
        assert auto.name == "tcg"  # a real probe: no kernel boots from these bytes
        with pytest.raises(UserError) as refused:
            accel.choose_accel("kvm", kernel, children, timeout=0.5)
    message = str(refused.value)
    assert message.startswith("--accel kvm: KVM does not run a guest on this host (")
    assert auto.reason.removeprefix("TCG emulation: ") in message
    assert "--accel auto" in refused.value.hint and "--accel tcg" in refused.value.hint


def test_kvm_that_boots_is_taken(cache: Path, tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", b"kernel image bytes")
    key = accel.cache_key(kernel)
    choice = {"name": "kvm", "reason": "KVM booted the kernel", "probe_s": 1.2}
    (cache / "local").mkdir(parents=True)
    (cache / "local" / "accel.json").write_text(json.dumps({"key": key, "choice": choice}))
    with Children() as children:
        taken = accel.choose_accel("kvm", kernel, children, timeout=0.5)
    assert taken.name == "kvm" and taken.reason.startswith("requested; KVM booted the kernel")
