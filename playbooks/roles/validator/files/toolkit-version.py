#!/usr/bin/env python3
"""Print the validator venv's torch release and CUDA variant; exit 0 only when they are the
pinned ones (argv: TORCH CUDA). Reads torch's files without importing it (no GPU needed).
Runs with the validator venv's own python."""

import importlib.metadata
import importlib.util
import json
import pathlib
import re
import sys


def main():
    want_torch, want_cuda = sys.argv[1], sys.argv[2]
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        print(json.dumps({"torch": None, "cuda": None}))
        return 1
    folder = pathlib.Path(next(iter(spec.submodule_search_locations)))
    text = (folder / "version.py").read_text(encoding="utf-8")
    match = re.search(r"^cuda\s*(?::[^=]*)?=\s*'([^']*)'", text, re.M)
    version = importlib.metadata.version("torch")
    cuda = match.group(1) if match else None
    print(json.dumps({"torch": version, "cuda": cuda}))
    return 0 if version.split("+")[0] == want_torch and cuda == want_cuda else 1


if __name__ == "__main__":
    sys.exit(main())
