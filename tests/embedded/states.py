"""A fresh state folder beside the e2e session's (empty catalog and registry) that shares
its caches, so a test that builds, interrupts or launches there does not see, or get seen
by, the other group's work in the session's folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from imagectl.clouds.local import saved_boot


def second_state(e2e_state: Path, tmp_path: Path, image_id: str | None = None) -> Path:
    """The base image and the validator wheels (hard links: nothing is copied; the
    accelerator probe's answer is in the user's cache folder, which every state folder
    shares); with ``image_id``, that candidate too, and the first run's saved boot of it
    (``imagectl.clouds.local.saved_boot``: beside the image in the registry, which a build
    there imports as a hard link of the same file, so instances restore it instead of
    booting). Only that candidate: the other group's builds write beside it meanwhile."""
    other = tmp_path / "state"
    (other / "local" / "candidates").mkdir(parents=True)
    sources = {
        "base": e2e_state / "local" / "base",
        "wheelhouse": e2e_state / "local" / "wheelhouse",
    }
    if image_id is not None:
        record = e2e_state / "registry" / "local-a" / "images" / f"{image_id.split(':')[-1]}.json"
        candidate = Path(json.loads(record.read_text())["source"]).parent
        sources[f"candidates/{candidate.name}"] = candidate
        image = record.with_suffix(".qcow2")
        boots = saved_boot.boots_folder(image)
        if boots.is_dir():
            dest = other / "registry" / image.parent.parent.name / "images" / boots.name
            shutil.copytree(boots, dest, copy_function=os.link)
    for name, src in sources.items():
        if src.exists():
            shutil.copytree(src, other / "local" / name, copy_function=os.link)
    return other
