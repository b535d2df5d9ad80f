"""What the manifest role's two writers (write-manifest, write-inventory) share: running a
command for its output, and writing the JSON document whole or not at all.

The role installs this file beside the writers (the writers' own folder is first on
``sys.path`` when ``python3`` runs one of them). Standard library only: it runs on the
image, before imagectl's own venv exists.
"""

import json
import os
import subprocess
import sys


def run(argv, *, missing_ok=False):
    """(exit code, standard output) of ``argv``; with ``missing_ok``, a program that is
    not installed answers (127, "") instead of raising FileNotFoundError."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return 127, ""
    return proc.returncode, proc.stdout


def emit(document, output):
    """The document as JSON: on standard output, or into ``output`` whole or not at all
    (a temporary file beside it, renamed; mode 0644), so that one command run both reads
    the image and writes the file (each extra module run costs a booted build seconds).
    Prints "changed" or "unchanged" (the role's changed_when) when it writes a file."""
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if not output:
        sys.stdout.write(text)
        return
    try:
        with open(output, encoding="utf-8") as fh:
            if fh.read() == text:  # nothing changed: say so
                print("unchanged")
                return
    except OSError:
        pass
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, output)
    print("changed")
