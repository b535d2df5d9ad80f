"""Image hygiene on a file tree (an unbooted image root), read with the validator's own
live facts: baked keys, machine-id, credentials and history fail; a clean tree passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from validator_support import SNAPSHOTS

from imagectl.validators.checks import specs_for
from imagectl.validators.expectations import Expectations
from imagectl.validators.host.facts import LiveFacts
from imagectl.validators.results import Action, Outcome
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context


def _tree(root: Path, *, dirty: bool) -> None:
    (root / "etc/ssh").mkdir(parents=True)
    (root / "root").mkdir()
    (root / "home/ubuntu/.ssh").mkdir(parents=True)
    (root / "etc/machine-id").write_text("" if not dirty else "0123456789abcdef0123456789abcdef\n")
    (root / "etc/ssh/sshd_config").write_text("PermitRootLogin no\n")
    if dirty:
        (root / "etc/ssh/ssh_host_ed25519_key").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
        (root / "root/.bash_history").write_text("aws s3 cp s3://secret .\n")
        (root / "root/.aws").mkdir()
        (root / "root/.aws/credentials").write_text("[default]\naws_access_key_id=AKIA...\n")
        (root / "home/ubuntu/.ssh/id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
        (root / "home/ubuntu/.ssh/authorized_keys").write_text("ssh-ed25519 AAAA packer_6543\n")
    else:
        (root / "root/.bash_history").write_text("")  # empty history is not a leak


def _run(root: Path, prefix: str = "image.") -> dict[str, list]:
    """The boot checks whose id starts with ``prefix``, on the tree at ``root``."""
    ctx = build_context(Options(expect=Expectations(gpus_expected=False), hygiene_root=str(root)))
    assert isinstance(ctx.facts, LiveFacts)
    results = run_checks([s for s in specs_for("boot") if s.id.startswith(prefix)], ctx)
    out: dict[str, list] = {}
    for r in results:
        out.setdefault(r.id, []).append(r)
    return out


def test_dirty_image_tree_is_blocked(tmp_path: Path) -> None:
    _tree(tmp_path, dirty=True)
    res = _run(tmp_path)
    for cid in (
        "image.ssh_host_keys",
        "image.build_keys",
        "image.machine_id",
        "image.credentials",
        "image.shell_history",
    ):
        (r,) = res[cid]
        assert r.outcome == Outcome.FAIL and r.action == Action.BLOCK_IMAGE, (cid, r.message)
    assert res["image.ssh_host_keys"][0].measured == ["/etc/ssh/ssh_host_ed25519_key"]
    assert res["image.credentials"][0].measured == ["/root/.aws/credentials"]
    assert sorted(res["image.build_keys"][0].measured) == [
        "/home/ubuntu/.ssh/authorized_keys",
        "/home/ubuntu/.ssh/id_ed25519",
    ]


def test_clean_image_tree_passes(tmp_path: Path) -> None:
    _tree(tmp_path, dirty=False)
    res = _run(tmp_path)
    assert {cid: r[0].outcome for cid, r in res.items()} == dict.fromkeys(
        (
            "image.ssh_host_keys",
            "image.build_keys",
            "image.machine_id",
            "image.credentials",
            "image.shell_history",
        ),
        Outcome.PASS,
    )


def test_corrupt_manifest_in_the_image_blocks_it(tmp_path: Path) -> None:
    """The image's own JSON files are read from the root; a truncated one is named."""
    _tree(tmp_path, dirty=False)
    (tmp_path / "etc/imagectl").mkdir()
    (tmp_path / "etc/imagectl/manifest.json").write_text('{"packages": {\n  "nccl": ')
    [result] = _run(tmp_path, "sw.manifest.agrees")["sw.manifest.agrees"]
    assert result.outcome == Outcome.FAIL and result.action == Action.BLOCK_IMAGE
    assert "manifest.json is corrupt: line 2" in result.message
    (tmp_path / "etc/imagectl/manifest.json").write_text('{"packages": {}}')
    [result] = _run(tmp_path, "sw.manifest.agrees")["sw.manifest.agrees"]
    assert result.outcome != Outcome.FAIL, result.message


@pytest.mark.parametrize(
    "name",
    [
        "faults/h100-sxm-8x--user-cloud-credentials-after-boot.json",
        "faults/h200-8x--user-ssh-key-after-boot.json",
    ],
)
def test_a_running_nodes_users_are_neither_judged_nor_listed(name: str) -> None:
    """A user's key or credentials made after the first boot: no failure, and the receipt
    names no user's file (fleet boot receipts are collected centrally)."""
    from imagectl.validators.session import validate
    from imagectl.validators.snapshot import load_snapshot

    receipt = validate(Options(snapshot=load_snapshot(SNAPSHOTS / name), snapshot_path=name))
    assert receipt.verdict == "pass", [c for c in receipt.checks if c.failed]
    text = receipt.model_dump_json()
    assert "/home/alice" not in text and "/home/bob" not in text
