"""Ansible connection plugin: run tasks inside a root file system with chroot(8).

The local build provisions the candidate's root file system natively with it before
QEMU boots the disk (``imagectl.embedded.provision``), and the role tests run site.yml in a
Debian root with it. community.general's chroot plugin would need Galaxy; this small
equivalent copies modules into the root file system and runs them with its own python3
via ``chroot ROOT /bin/sh -c CMD``, exactly as they run on the image. The inventory
host name (or ``ansible_host``) is the root folder. playbooks/ansible.cfg names this
folder, so ``ansible_connection=imagectl_chroot`` works wherever that config is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: imagectl_chroot
short_description: Run tasks inside a root file system with chroot
description:
  - Runs commands with chroot(8) in a local folder holding a root file system.
author: imagectl
options:
  remote_addr:
    description: Path of the root file system.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
"""


class Connection(ConnectionBase):
    transport = "imagectl_chroot"
    has_pipelining = True
    has_tty = False
    default_user = "root"
    _connected: bool  # set by ConnectionBase

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.root = ""

    def _connect(self) -> Connection:
        if not self._connected:
            self.root = os.path.abspath(str(self.get_option("remote_addr")))
            if not os.path.isfile(os.path.join(self.root, "bin", "sh")) and not os.path.isfile(
                os.path.join(self.root, "usr", "bin", "sh")
            ):
                raise AnsibleError(f"{self.root} does not look like a root file system")
            if os.geteuid() != 0:
                raise AnsibleError("the imagectl_chroot connection needs root")
            self._connected = True
        return self

    def exec_command(
        self, cmd: str, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        proc = subprocess.Popen(
            ["chroot", self.root, "/bin/sh", "-c", cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={
                "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG": "C.UTF-8",
                "HOME": "/root",
                "TERM": "dumb",
            },
        )
        out, err = proc.communicate(in_data)
        return proc.returncode, out, err

    def _inside(self, path: str) -> str:
        if not path.startswith(os.sep):
            path = os.path.join(os.sep, "root", path)
        return os.path.join(self.root, os.path.normpath(path).lstrip(os.sep))

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        self._connect()
        dest = self._inside(out_path)
        try:
            shutil.copyfile(in_path, dest)
        except OSError as exc:
            raise AnsibleError(f"cannot copy {in_path} to {dest}: {exc}") from exc

    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        self._connect()
        try:
            shutil.copyfile(self._inside(in_path), out_path)
        except OSError as exc:
            raise AnsibleError(f"cannot fetch {in_path}: {exc}") from exc

    def close(self) -> None:
        self._connected = False
