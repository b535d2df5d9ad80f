"""Nothing a playbook downloads reaches root unverified.

Every task of every task file under playbooks/ is read (blocks, rescue and always
included). A download is a ``get_url``, a ``uri`` that saves (``dest``), an ``unarchive``
of a URL, an ``apt`` of a ``deb:`` URL, or a ``shell``/``command``/``script`` that runs
curl or wget. Each ``get_url``/``uri`` download must carry a ``checksum`` or be checked by
a later task of the same file that names what it saved and verifies it: a pinned OpenPGP
fingerprint (openpgp-fingerprints.py) or a signature (gpgv). The others have no way to
verify and are refused outright.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import ROOT

PLAYBOOKS = ROOT / "playbooks"
VERIFIERS = ("openpgp-fingerprints.py", "gpgv")
SHELLS = {"shell", "command", "script", "raw"}
# Downloads known to be unverified, each with why it is still there. The test fails when one
# is verified (remove it here) as much as when a new one appears.
KNOWN_UNVERIFIED: set[str] = set()


def _module(task: dict[str, Any]) -> tuple[str, Any]:
    for key, value in task.items():
        short = key.rsplit(".", 1)[-1]
        if short in {"get_url", "uri", "unarchive", "apt", *SHELLS}:
            return short, value
    return "", None


def tasks(items: list[Any] | None) -> Iterator[dict[str, Any]]:
    """Every task of a task list, blocks flattened in order."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        if any(k in task for k in ("block", "rescue", "always")):
            for part in ("block", "rescue", "always"):
                yield from tasks(task.get(part))
        else:
            yield task


def task_lists(path: Path) -> list[list[dict[str, Any]]]:
    doc = yaml.safe_load(path.read_text()) or []
    if path.parent.name == "tasks" or path.parent.name == "handlers":
        return [list(tasks(doc))]
    out = []  # a playbook: each play's task sections
    for play in doc if isinstance(doc, list) else []:
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            if isinstance(play, dict) and play.get(section):
                out.append(list(tasks(play[section])))
    return out


def saved_names(task: dict[str, Any], args: dict[str, Any]) -> list[str]:
    """What a download saved, as later tasks name it: each loop item's dest, or the dest
    without its Jinja braces."""
    loop = task.get("loop") or task.get("with_items")
    if isinstance(loop, list) and "item." in str(args.get("dest", "")):
        key = re.search(r"item\.(\w+)", str(args["dest"]))[1]  # type: ignore[index]
        return [str(item[key]) for item in loop if isinstance(item, dict) and key in item]
    dest = str(args.get("dest", ""))
    inner = re.findall(r"\{\{\s*([^}]+?)\s*\}\}", dest)
    return [inner[-1]] if dest.endswith("}}") and inner else [dest.rsplit("/", 1)[-1]]


def problems(name: str, items: list[dict[str, Any]]) -> list[str]:
    found = []
    for i, task in enumerate(items):
        module, args = _module(task)
        label = f"{name}: {task.get('name', module)}"
        text = str(args)
        if module in ("get_url", "uri"):
            if module == "uri" and not (isinstance(args, dict) and args.get("dest")):
                continue  # an API call: nothing saved
            if isinstance(args, dict) and args.get("checksum"):
                continue
            later = [str(t) for t in items[i + 1 :]]
            names = saved_names(task, args if isinstance(args, dict) else {})
            unverified = [
                n
                for n in names
                if not any(n in t and any(v in t for v in VERIFIERS) for t in later)
            ]
            if unverified or not names:
                found.append(f"{label}: no checksum, and nothing later verifies {unverified}")
        elif module == "unarchive" and re.match(r"^\s*(https?|ftp)://", str(args.get("src", ""))):
            found.append(f"{label}: unpacks a URL, which nothing verifies")
        elif module == "apt" and re.search(r"(https?|ftp)://", str((args or {}).get("deb", ""))):
            found.append(f"{label}: installs a .deb from a URL, outside apt's signatures")
        elif module in SHELLS and re.search(r"\b(curl|wget)\b", text + str(task.get("cmd", ""))):
            found.append(f"{label}: downloads with curl/wget, which nothing verifies")
    return found


def every_problem() -> list[str]:
    out = []
    for path in sorted(PLAYBOOKS.rglob("*.yml")):
        rel = str(path.relative_to(PLAYBOOKS))
        if "/defaults/" in rel or "/meta/" in rel or "/vars/" in rel:
            continue
        for items in task_lists(path):
            out += problems(rel, items)
    return out


def test_no_download_reaches_root_unverified() -> None:
    found = every_problem()
    unknown = [p for p in found if not any(p.startswith(k + ":") for k in KNOWN_UNVERIFIED)]
    assert unknown == [], "\n".join(unknown)
    fixed = [k for k in KNOWN_UNVERIFIED if not any(p.startswith(k + ":") for p in found)]
    assert fixed == [], f"verified now: remove from KNOWN_UNVERIFIED: {fixed}"


def test_the_reader_sees_every_download_the_roles_make() -> None:
    """The verified downloads are found as downloads too (not skipped unread)."""
    names = []
    for path in sorted(PLAYBOOKS.rglob("tasks/*.yml")):
        for items in task_lists(path):
            names += [str(t.get("name")) for t in items if _module(t)[0] == "get_url"]
    assert any("EFA installer (refused unless its sha256" in n for n in names), names
    assert any("installer's signature and AWS's EFA key" in n for n in names), names
    assert any("NVIDIA's repository key" in n for n in names), names


@pytest.mark.parametrize(
    ("tasks_yaml", "why"),
    [
        (  # the efa role as it was: downloaded, unpacked and run unchecked
            "- name: Download\n  ansible.builtin.get_url:\n    url: https://x/e.tar.gz\n"
            "    dest: /tmp/e.tar.gz\n- ansible.builtin.unarchive:\n    src: /tmp/e.tar.gz\n"
            "    dest: /tmp\n    remote_src: true\n",
            "no checksum",
        ),
        (  # a key fetched, then "checked" by a task that is no verifier
            "- name: Key\n  ansible.builtin.get_url:\n    url: https://x/k\n    dest: /tmp/k.asc\n"
            "- ansible.builtin.command: cat /tmp/k.asc\n",
            "no checksum",
        ),
        ("- ansible.builtin.shell: curl -fsSL https://x/i.sh | sh\n", "curl/wget"),
        ("- ansible.builtin.unarchive:\n    src: https://x/a.tgz\n    dest: /opt\n", "URL"),
        (
            "- block:\n  - ansible.builtin.uri:\n      url: https://x/b\n      dest: /tmp/b\n",
            "no checksum",
        ),
    ],
)
def test_unverified_downloads_are_caught(tasks_yaml: str, why: str) -> None:
    found = problems("t.yml", list(tasks(yaml.safe_load(tasks_yaml))))
    assert len(found) == 1 and why in found[0], found
