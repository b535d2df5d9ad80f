"""The local demonstration's trust without an exported variable.

``imagectl attest --new-key --save-trust`` writes the state folder's trust file and names
it in the state folder's settings (``<state>/settings.toml``), so a new shell's ``verify``
finds it. Precedence, strongest first: ``--trust``, ``$IMAGECTL_ATTESTATION_TRUST``, the
state folder's setting, the repository's anchor. Offline ``verify`` names the key id that
signed, and says first that it checked no revocation list when given none.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from imagectl.core.errors import UserError
from imagectl.paths import find_workspace
from imagectl.provenance.keys import (
    ENV_TRUST,
    TRUST_ANCHOR,
    load_signer,
    load_trust,
    trust_document,
    trust_path,
)
from imagectl.state_settings import load_settings, save_setting, settings_path
from tests.cli.hints import fill, parse
from tests.provenance.statements import IMAGE, signed_envelope


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("IMAGECTL_STATE_DIR", str(folder))
    monkeypatch.delenv(ENV_TRUST, raising=False)
    monkeypatch.delenv("IMAGECTL_ATTESTATION_SIGNER", raising=False)
    return folder


def _trust_file(folder: Path, signer: CryptoSigner, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(trust_document([signer.public_key]))
    return path


def test_save_trust_records_the_state_key_and_a_new_shell_verifies_with_it(
    state: Path, tmp_path: Path, cli
) -> None:
    made = cli("attest", "--new-key", "--save-trust")
    assert made.code == 0, made.err
    assert "trusted in this state folder" in made.err
    saved = state / "keys" / "attestation-trust.json"
    assert json.loads(made.out) == json.loads(saved.read_text())
    assert load_settings() == {"attestation_trust": str(saved)}
    assert trust_path() == saved  # no variable exported in this "shell"

    signer, public = load_signer()
    envelope = signed_envelope(signer, tmp_path / "in")
    result = cli("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope))
    assert result.code == 0, result.out + result.err
    # item 7: the key id that signed, never "signed by key -"
    assert f"signed by key {public.keyid[:16]}" in result.out
    assert "signed by key -" not in result.out
    # item 2: no revocation list given, said first
    first = result.out.strip().splitlines()[0]
    assert re.match(r"1 of 3 checks could not run: revocation", first), result.out
    as_json = cli("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope), "--json").json()
    assert as_json["keyid"] == public.keyid
    assert as_json["complete"] is False and as_json["valid"] is True


def test_precedence_flag_then_variable_then_state_folder_then_anchor(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anchor = find_workspace().root / TRUST_ANCHOR
    assert trust_path() == anchor  # nothing set
    saved = tmp_path / "saved.json"
    save_setting("attestation_trust", str(saved))
    assert trust_path() == saved
    variable = tmp_path / "variable.json"
    monkeypatch.setenv(ENV_TRUST, str(variable))
    assert trust_path() == variable
    flag = tmp_path / "flag.json"
    assert trust_path(flag) == flag
    # a relative setting is taken from the state folder
    monkeypatch.delenv(ENV_TRUST)
    save_setting("attestation_trust", "keys/t.json")
    assert trust_path() == state / "keys" / "t.json"


def test_each_level_is_really_used_by_verify(state: Path, tmp_path: Path, cli, monkeypatch) -> None:
    alice, bob = CryptoSigner.generate_ed25519(), CryptoSigner.generate_ed25519()
    envelope = signed_envelope(alice, tmp_path / "in")
    alice_trust = _trust_file(tmp_path / "t", alice, "alice.json")
    bob_trust = _trust_file(tmp_path / "t", bob, "bob.json")

    def verify(*more: str) -> int:
        args = ("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope), *more)
        return int(cli(*args).code)

    save_setting("attestation_trust", str(alice_trust))
    assert verify() == 0  # the state folder's setting
    monkeypatch.setenv(ENV_TRUST, str(bob_trust))
    assert verify() == 1  # the variable wins over the state folder
    assert verify("--trust", str(alice_trust)) == 0  # the flag wins over the variable


def test_the_empty_anchor_hint_leads_somewhere(state: Path) -> None:
    anchor = find_workspace().root / TRUST_ANCHOR
    with pytest.raises(UserError) as info:
        load_trust(anchor)
    hint = info.value.hint or ""
    assert "Trust the keys pinned in the repository" not in hint
    commands = re.findall(r"`(imagectl [^`]+)`", hint)
    assert "imagectl attest --new-key --save-trust" in commands
    for command in commands:
        parse(fill(command))


def test_a_broken_settings_file_is_exit_2_naming_it(state: Path, cli) -> None:
    state.mkdir(parents=True, exist_ok=True)
    settings_path().write_text("attestation_trust = [1, 2\n")
    result = cli("verify", IMAGE, "--cloud", "aws", "--envelope", "/nonexistent")
    assert result.code == 2
    assert str(settings_path()) in " ".join(result.err.split())
    settings_path().write_text('color = "blue"\n')
    with pytest.raises(UserError, match="not a setting this tool knows"):
        load_settings()


def test_save_trust_alone_is_refused(state: Path, cli) -> None:
    result = cli("attest", "--save-trust")
    assert result.code == 2 and "--new-key" in result.err


def _mallory_named_by_settings(state: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A settings file naming Mallory's trust file, and an envelope Mallory signed: were
    the settings honoured, verify would pass (exit 0) on Mallory's word."""
    mallory = CryptoSigner.generate_ed25519()
    envelope = signed_envelope(mallory, tmp_path / "in")
    trust = _trust_file(tmp_path / "t", mallory, "mallory.json")
    save_setting("attestation_trust", str(trust))
    return settings_path(), envelope


@pytest.mark.parametrize("loose", ["file 0666", "folder 0777", "parent 0777", "file owner"])
def test_a_settings_file_others_can_change_is_refused(
    state: Path, tmp_path: Path, cli, loose: str
) -> None:
    """The file that names the trust anchor is checked like the trust file: owned by
    another user, writable by others, or in (or below) a folder others can write, it is
    exit 2 naming the path and the fix, and the trust file it names is never used."""
    settings, envelope = _mallory_named_by_settings(state, tmp_path)
    item = {"file": settings, "folder": state, "parent": tmp_path}[loose.split()[0]]
    if loose == "file owner":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(settings, 65534, 65534)
        words = [f"{settings} is owned by uid 65534", f"chown {settings}"]
    else:
        item.chmod(int(loose.split()[1], 8))
        words = [f"{item}", f"writable by others (mode {loose.split()[1]})", f"chmod go-w {item}"]
    try:
        result = cli("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope))
    finally:
        item.chmod(0o700 if item.is_dir() else 0o600)
    flat = " ".join(result.err.split())
    assert result.code == 2, result.out + result.err
    assert f"the state folder's settings file {settings} is refused" in flat, flat
    for word in words:
        assert word in flat, flat
    # the same file kept tight is honoured (the refusal was for its modes alone)
    if loose == "file owner":
        os.chown(settings, os.geteuid(), os.getegid())
    assert cli("verify", IMAGE, "--cloud", "aws", "--envelope", str(envelope)).code == 0
