"""Ansible action plugin: write a host's receipt into a folder of the controller.

validate.yml's last step. It ran as ``ansible.builtin.copy`` with ``content:``, delegated
to localhost: two modules (stat, then copy), each an interpreter started and the module
shipped to it, about 1.4 s of the controller's CPU per host, more than the validator's
own replay run. An action plugin runs in the worker Ansible already forked for the task
and needs no connection, so the receipt is written where the controller is, in
milliseconds, whatever the host's connection.

Arguments: ``content`` (text, the validator's standard output) and ``dest`` (the file).
The file is written beside ``dest`` and renamed onto it (a reader sees the old receipt or
the whole new one, never half), mode 0600, and ends with one newline. Ansible loads
plugins from the ``action_plugins`` folder beside a playbook, so validate.yml finds it
wherever it is run from (the workspace, the installed package).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("content", "dest"))
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        content = self._task.args.get("content")
        dest = self._task.args.get("dest")
        if not isinstance(content, str):
            raise AnsibleActionFail(
                f"imagectl_receipt: content must be text, got {type(content).__name__}"
            )
        if not isinstance(dest, str) or not dest:
            raise AnsibleActionFail("imagectl_receipt: dest (the receipt's path) is required")
        text = content.rstrip("\n") + "\n"
        folder = os.path.dirname(dest) or "."
        try:
            fd, part = tempfile.mkstemp(prefix=".receipt-", suffix=".part", dir=folder)
        except OSError as exc:
            raise AnsibleActionFail(f"imagectl_receipt: cannot write in {folder}: {exc}") from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(part, 0o600)
            os.replace(part, dest)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise AnsibleActionFail(f"imagectl_receipt: cannot write {dest}: {exc}") from exc
        result.update(changed=True, dest=dest, size=len(text.encode("utf-8")))
        return result
