"""Ansible action plugin: wait until the host takes a login.

validate.yml's and fabric.yml's first step. ``ansible.builtin.wait_for_connection`` proves
a host up by running the ping module on it: an interpreter started and the module
shipped to it, about 6.5 s of an emulated guest's CPU (QEMU under TCG, measured on the
local candidate) where a raw command costs 0.35 s; on a GPU node it is a Python start
before the real work. This plugin keeps wait_for_connection's loop (its ``timeout``,
``connect_timeout``, ``sleep`` and ``delay``; the connection's transport test first,
then an attempt per ``sleep``, the connection reset between attempts) and makes each
attempt one command, ``true``, over the host's own connection: the login, its key and
the shell the next tasks use. A host that never takes the login fails the task with the
last attempt's error after ``timeout`` seconds, as wait_for_connection does. The host's
Python is not tested here: the validator's run is the next task and says plainly if it
cannot start.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Any

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action.wait_for_connection import ActionModule as WaitForConnection
from ansible.plugins.action.wait_for_connection import TimedOutException


class ActionModule(WaitForConnection):  # type: ignore[misc]
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        args = self._task.args
        connect_timeout = int(args.get("connect_timeout", self.DEFAULT_CONNECT_TIMEOUT))
        delay = int(args.get("delay", self.DEFAULT_DELAY))
        sleep = int(args.get("sleep", self.DEFAULT_SLEEP))
        timeout = int(args.get("timeout", self.DEFAULT_TIMEOUT))
        if self._task.check_mode:
            return {"skipped": True}
        result: dict[str, Any] = super(WaitForConnection, self).run(tmp, task_vars or {})

        def login(_connect_timeout: int) -> None:
            with contextlib.suppress(AttributeError):  # a connection without reset()
                self._connection.reset()
            res = self._low_level_execute_command("true", sudoable=False)
            if res.get("rc") != 0:
                why = to_text(res.get("stderr") or res.get("stdout") or "").strip()
                raise RuntimeError(f"'true' exited {res.get('rc')}: {why[-300:]}")

        start = datetime.now()
        if delay:
            time.sleep(delay)
        try:
            if hasattr(self._connection, "transport_test"):
                self.do_until_success_or_timeout(
                    self._connection.transport_test, timeout, connect_timeout,
                    what_desc="connection port up", sleep=sleep,
                )  # fmt: skip
            self.do_until_success_or_timeout(
                login, timeout, connect_timeout, what_desc="a login", sleep=sleep
            )
        except TimedOutException as exc:
            result["failed"] = True
            result["msg"] = to_text(exc)
        result["elapsed"] = (datetime.now() - start).seconds
        return result
