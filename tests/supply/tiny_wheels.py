"""Small real wheels and a PEP 503 index of them, for supply-chain tests without PyPI.

Each wheel is a valid pure-Python wheel (dist-info METADATA with Requires-Dist, WHEEL,
RECORD with sha256s) holding one importable module, so pip resolves, downloads, checks
hashes of and installs it exactly as it does a wheel from an index."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from tests.support import simple_index


def tiny_wheel(
    folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
    *, source: str | None = None, console_scripts: dict[str, str] | None = None,
) -> Path:  # fmt: skip
    """``source``: the module's text (default: its VERSION); ``console_scripts``: name ->
    ``module:function``, the entry points pip makes commands of."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{name}.py": source if source is not None else f"VERSION = {version!r}\n",
        f"{dist}/METADATA": meta,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: imagectl-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    if console_scripts:
        files[f"{dist}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{script} = {target}\n" for script, target in console_scripts.items()
        )
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in sorted(files.items()):
            zinfo = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            zf.writestr(zinfo, text)
    return wheel


def tiny_index(root: Path) -> str:
    """alpha 1.0 needs beta, and gamma on Python < 3.11 only (like pytest's
    exceptiongroup); alpha 0.9 is older. Returns the index's file:// URL."""
    src = root / "dist"
    wheels = [
        tiny_wheel(src, "alpha", "0.9"),
        tiny_wheel(src, "alpha", "1.0", ("beta>=2", 'gamma>=1; python_version < "3.11"')),
        tiny_wheel(src, "beta", "2.1"),
        tiny_wheel(src, "gamma", "1.4"),
    ]
    return simple_index(root / "index", wheels)
