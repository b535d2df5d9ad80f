"""Who is acting: recorded in the catalog's events, locks and promotions, and tagged on the
instances a validation launches. One answer everywhere: ``$IMAGECTL_ACTOR`` (CI sets it to
the pipeline run), else the OS user, else 'unknown'."""

from __future__ import annotations

import getpass
import os

ENV_ACTOR = "IMAGECTL_ACTOR"


def current_actor() -> str:
    actor = os.environ.get(ENV_ACTOR, "").strip()
    if actor:
        return actor
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): still record something
        return "unknown"
