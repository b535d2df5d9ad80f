"""Every apt repository a playbook adds is trusted through a key pinned by fingerprint.

Every task of every role's task files is read (blocks included). A repository is added by
a ``copy``/``template``/``lineinfile``/``blockinfile`` that writes a ``deb`` line or a file
under ``sources.list.d``, by ``apt_repository`` or ``deb822_repository``; ``apt_key`` and a
shell's ``apt-key``/``add-apt-repository`` are refused outright (they trust a key for every
repository, pinned by nothing). Each repository must name its keyring with ``signed-by``,
and that keyring must be written, in the role (its ``include_tasks``, and an
``include_role``'s ``tasks_from`` with the variables it hands over), only after a task runs
openpgp-fingerprints.py with a fingerprints variable that an ``assert`` requires non-empty
first; imagectl must fill that variable from images/compat/apt_keys.yaml
(``imagectl.packer.variables.ansible_vars``, for a stack that builds the role), and the
role's default must be empty (so a run without imagectl's variables stops at the assert).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagectl.paths import find_workspace
from imagectl.supply.apt_keys import load_apt_keys
from tests.ansible.test_root_downloads import tasks
from tests.support import ROOT

ROLES = ROOT / "playbooks" / "roles"
WRITERS = {"copy", "template", "lineinfile", "blockinfile"}
VERIFIER = "openpgp-fingerprints.py"
VAR = re.compile(r"\{\{\s*(\w+)[^}]*\}\}")


def _module(task: dict[str, Any]) -> tuple[str, Any]:
    for key, value in task.items():
        short = key.rsplit(".", 1)[-1]
        if short in WRITERS | {
            "apt_repository", "deb822_repository", "apt_key", "shell", "command", "assert",
            "script", "include_tasks", "import_tasks", "include_role", "import_role",
        }:  # fmt: skip
            return short, value
    return "", None


@dataclass
class Flat:
    """A role's tasks in order, includes followed, each variable renamed to the name the
    including role gives it (include_role's vars: nvidia_repo_keyring -> infiniband_keyring)."""

    role: str
    items: list[tuple[dict[str, Any], dict[str, str]]]


def _load(path: Path) -> list[dict[str, Any]]:
    return list(tasks(yaml.safe_load(path.read_text()) or []))


def flatten(role: str, file: str = "main.yml", renames: dict[str, str] | None = None) -> Flat:
    renames = renames or {}
    out: list[tuple[dict[str, Any], dict[str, str]]] = []
    path = ROLES / role / "tasks" / file
    for task in _load(path) if path.is_file() else []:
        module, args = _module(task)
        if module in ("include_tasks", "import_tasks"):
            name = args if isinstance(args, str) else (args or {}).get("file", "")
            out += flatten(role, str(name), renames).items
        elif module in ("include_role", "import_role"):
            mapping = {
                k: (VAR.search(str(v))[1] if VAR.search(str(v)) else str(v))  # type: ignore[index]
                for k, v in (task.get("vars") or {}).items()
            }
            mapping = {k: renames.get(v, v) for k, v in mapping.items()}
            inner = flatten(args["name"], f"{args.get('tasks_from', 'main')}.yml".replace(
                ".yml.yml", ".yml"), mapping)  # fmt: skip
            out += inner.items
        else:
            out.append((task, renames))
    return Flat(role, out)


def _rename(text: str, renames: dict[str, str]) -> str:
    return VAR.sub(lambda m: "{{ " + renames.get(m[1], m[1]) + " }}", text)


def sources(flat: Flat) -> list[tuple[str, str | None]]:
    """(task name, the keyring variable its signed-by names, or None) per repository."""
    found = []
    for task, renames in flat.items:
        module, args = _module(task)
        label = f"{flat.role}: {task.get('name', module)}"
        text = _rename(str(args), renames)
        if module in WRITERS and isinstance(args, dict):
            body = (
                str(args.get("content", ""))
                + str(args.get("line", ""))
                + str(args.get("block", ""))
            )
            if not (re.search(r"(?m)^\s*deb(-src)?\s", body)
                    or "sources.list" in str(args.get("dest", args.get("path", "")))):  # fmt: skip
                continue
        elif module in ("apt_repository", "deb822_repository"):
            text = str(args.get("repo", "")) + " signed-by=" + str(args.get("signed_by", ""))
        elif module == "apt_key":
            found.append((f"{label} (apt_key trusts a key for every repository)", None))
            continue
        elif module in ("shell", "command") and re.search(r"apt-key|add-apt-repository", text):
            found.append((f"{label} (apt-key/add-apt-repository in a shell)", None))
            continue
        else:
            continue
        m = re.search(r"signed-by=\{\{\s*(\w+)\s*\}\}", _rename(text, renames))
        found.append((label, m[1] if m else None))
    return found


def keyring_checks(flat: Flat, keyring: str) -> list[str]:
    """The fingerprints variables that a verifier runs with before each task writing
    ``keyring``, where an assert earlier requires them non-empty ([] if a write is not)."""
    asserted: set[str] = set()
    verified: list[str] = []
    writes: list[list[str]] = []
    for task, renames in flat.items:
        module, args = _module(task)
        text = _rename(str(args) + str(task.get("cmd", "")), renames)
        if module == "assert":
            bare = re.findall(r"(\w+_fingerprints) \| length > 0", str(args))
            asserted |= {renames.get(v, v) for v in bare}  # a bare Jinja expression
        if VERIFIER in text:
            verified += re.findall(r"\{\{ (\w+_fingerprints) \}\}", text)
        dest = _rename(str(args.get("dest", "")), renames) if isinstance(args, dict) else ""
        if module in WRITERS and dest == "{{ " + keyring + " }}":
            writes.append([v for v in verified if v in asserted])
    return [v for w in writes for v in w] if writes and all(writes) else []


def every_role() -> list[str]:
    return sorted(p.parent.parent.name for p in ROLES.glob("*/tasks/main.yml"))


def repositories() -> list[tuple[str, str, str | None]]:
    return [(role, label, key) for role in every_role() for label, key in sources(flatten(role))]


def test_the_reader_finds_both_vendor_repositories() -> None:
    found = {(role, key) for role, _, key in repositories()}
    assert ("nvidia_repo", "nvidia_repo_keyring") in found
    assert ("infiniband", "infiniband_keyring") in found


@pytest.mark.parametrize(("role", "label", "keyring"), repositories(),
                         ids=[f"{r}:{k}" for r, _, k in repositories()])  # fmt: skip
def test_every_repository_is_signed_by_a_fingerprint_checked_key(role, label, keyring) -> None:
    assert keyring is not None, f"{label}: no signed-by keyring (apt would trust any key)"
    fprs = keyring_checks(flatten(role), keyring)
    assert fprs, (
        f"{label}: {keyring} is written without a fingerprint check "
        f"(openpgp-fingerprints.py with asserted, non-empty *_fingerprints) before it"
    )
    # fail closed: without imagectl's variables the role's own default is empty
    for var in fprs:
        defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
        assert defaults.get(var) == [], f"{role}/defaults: {var} must default to []"


def test_imagectl_passes_every_checked_fingerprint_from_apt_keys() -> None:
    """For a stack and cloud that build each repository's role, the variables imagectl
    hands the playbook carry that role's fingerprints from images/compat/apt_keys.yaml."""
    from imagectl.packer.variables import ansible_vars
    from imagectl.stacks import load_resolved

    ws = find_workspace(ROOT)
    pinned = {f for key in load_apt_keys(ws.compat_dir).values() for f in key.fingerprints}
    avars = ansible_vars(load_resolved(ws.images, "h100-training")[1], "azure")
    assert avars["infiniband_enabled"] and avars["nvidia_repo_enabled"]  # both built here
    for role, _, keyring in repositories():
        assert keyring is not None
        for var in keyring_checks(flatten(role), keyring):
            given = avars.get(var)
            assert given and set(given) <= pinned, f"{var}: {given!r} is not from apt_keys.yaml"
    doca = load_apt_keys(ws.compat_dir)["mellanox-doca"]
    assert avars["infiniband_repo_key_fingerprints"] == list(doca.fingerprints)
    assert avars["infiniband_repo_key_file"] == doca.key_file


def test_pinned_doca_fingerprint_with_its_source() -> None:
    key = load_apt_keys(find_workspace(ROOT).compat_dir)["mellanox-doca"]
    assert key.fingerprints == ("70454E6BF5D9C2D3B78709E8DC726C5E41B9CC50",)
    # apt's NO_PUBKEY for today's DOCA repositories names this key id: its low 64 bits
    assert key.fingerprints[0].endswith("DC726C5E41B9CC50")
    assert "AgentBaker" in key.source and key.key_file == "doca_keyring.gpg"


@pytest.mark.parametrize(
    ("tasks_yaml", "why"),
    [
        (  # the infiniband role as it was: a key downloaded straight into the keyring
            "- name: Keyring\n  ansible.builtin.get_url:\n    url: https://x/GPG-KEY.pub\n"
            "    dest: '{{ k }}'\n- name: Repo\n  ansible.builtin.copy:\n    dest: /etc/apt/x\n"
            "    content: 'deb [signed-by={{ k }}] https://x ./'\n",
            "without a fingerprint check",
        ),
        (  # a verifier whose fingerprints nothing requires non-empty: an empty list passes
            "- ansible.builtin.script: openpgp-fingerprints.py /tmp/k {{ f_fingerprints }}\n"
            "- ansible.builtin.copy:\n    src: /tmp/k\n    dest: '{{ k }}'\n"
            "- ansible.builtin.copy:\n    dest: /etc/apt/sources.list.d/x.list\n"
            "    content: 'deb [signed-by={{ k }}] https://x ./'\n",
            "without a fingerprint check",
        ),
        (  # no signed-by: apt trusts every key it has
            "- ansible.builtin.copy:\n    dest: /etc/apt/sources.list.d/x.list\n"
            "    content: 'deb https://x ./'\n",
            "no signed-by",
        ),
        ("- ansible.builtin.apt_key:\n    url: https://x/k.asc\n", "no signed-by"),
        ("- ansible.builtin.shell: curl https://x/k | apt-key add -\n", "no signed-by"),
    ],
)
def test_unpinned_repositories_are_caught(tasks_yaml: str, why: str, tmp_path) -> None:
    flat = Flat("t", [(t, {}) for t in tasks(yaml.safe_load(tasks_yaml))])
    (found,) = sources(flat)
    label, keyring = found
    problem = (
        f"{label}: no signed-by"
        if keyring is None
        else ("ok" if keyring_checks(flat, keyring) else f"{label}: without a fingerprint check")
    )
    assert why in problem, problem
