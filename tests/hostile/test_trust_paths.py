"""Every path that decides trust is checked by one function, and each is tested.

A path decides trust when what it holds or names is believed without further proof (the
trust file and the settings file that names it, revocation lists and the versions kept of
them, a signing key, the folders a ``.pth`` adds to every validator run, a cached tree
unpacked as root). Each is checked by ``imagectl.core.trustpath.refusal``: the path and
every folder above it must belong to this user or root and be writable by nobody else.

Whole class: the AST of pipeline/ and validators/ is read for every call of ``refusal``;
each calling function must be in ``READERS`` with the test that plants a loose path for
it (and that test must exist), and no other module may inspect owners or write bits
itself (a second, weaker copy of the rule is how settings.toml went unchecked).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import ROOT

# the function that calls refusal -> what it reads -> the test planting a loose one
READERS = {
    "validators/attestation.py:check_file": (
        "trust files, attestations, revocation lists and the kept versions (every "
        "_read_json of validators.attestation: verify, verify-node, promote)",
        ["tests/provenance/test_trust_anchor.py::test_files_others_can_write_are_refused",
         "tests/provenance/test_trust_anchor.py::test_symlinks_are_resolved_and_checked",
         "tests/provenance/test_trust_anchor.py::"
         "test_a_trust_file_owned_by_another_user_is_refused"],
    ),
    "pipeline/state_settings.py:load_settings": (
        "the state folder's settings.toml (it names the trust file)",
        ["tests/provenance/test_state_trust.py::"
         "test_a_settings_file_others_can_change_is_refused"],
    ),
    "pipeline/supply/bundle_installer.py:checked_host_site_packages": (
        "every host site-packages folder install.sh --host-site-packages writes into the .pth",
        ["tests/supply/test_bundle.py::test_host_site_packages_others_can_write_are_refused"],
    ),
    "pipeline/core/sitetrust.py:refused": (
        "every .pth file of the running venv and every folder one adds (a path line, "
        "site.addsitedir), checked at each start before any command runs",
        ["tests/hostile/test_site_pth.py::test_a_hostile_pth_target_is_refused_at_run_time",
         "tests/hostile/test_site_pth.py::test_a_pth_file_others_can_write_is_refused"],
    ),
    "pipeline/provenance/keys.py:_file_signer": (
        "the file2: signing key (whoever can replace it signs as this signer)",
        ["tests/provenance/test_signers.py::test_a_key_file_readable_by_others_is_refused"],
    ),
    "pipeline/embedded/base.py:_trusted": (
        "the cached debootstrap tree, unpacked as root into the local image",
        ["tests/embedded/test_base_and_options.py::"
         "test_the_debootstrap_tree_is_shared_by_state_folders_when_it_can_be_trusted"],
    ),
}  # fmt: skip

# inspecting owners or write bits outside trustpath.py, and why that one is not a copy
OWN_CHECKS = {
    "pipeline/provenance/keys.py": "mode & 0o077: a private key must not be readable "
    "(secrecy, not trust: refusal() runs first)",
}
MODE_CHECK = re.compile(r"st_uid|S_IWOTH|S_IWGRP|0o022|0o002|0o077")


def _sources() -> list[Path]:
    return sorted(p for top in ("pipeline", "validators") for p in (ROOT / top).rglob("*.py"))


def _callers() -> set[str]:
    found = set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel == "pipeline/core/trustpath.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                    if name == "refusal":
                        found.add(f"{rel}:{fn.name}")
    return found


def test_every_trust_deciding_read_is_listed_with_its_test() -> None:
    callers = _callers()
    assert callers == set(READERS), (
        f"calls of refusal() not in READERS: {sorted(callers - set(READERS))}; listed but "
        f"calling it no more: {sorted(set(READERS) - callers)}"
    )
    for reader, (_what, tests) in READERS.items():
        for test in tests:
            file, name = test.split("::")
            text = (ROOT / file).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", text, re.M), (reader, test)


def test_no_second_copy_of_the_rule() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _sources()
        if path.relative_to(ROOT).as_posix() not in ("pipeline/core/trustpath.py", *OWN_CHECKS)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MODE_CHECK.search(line) and not line.lstrip().startswith("#")
    ]
    assert not offenders, (
        "check owners and write bits with imagectl.core.trustpath.refusal:\n" + "\n".join(offenders)
    )
