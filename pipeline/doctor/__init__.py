"""``imagectl doctor``: everything a run needs from an account, checked before money is spent.

One ``Finding`` per check: credentials, each permission the run's roles need (the
documents under ``images/permissions/``), GPU quota and capacity for each validation
shape, the resources the run writes to, the runner's address, and placeholder ids.
``offline`` holds the checks that make no cloud call (what ``build`` and
``validate-image`` run first); ``quota`` the quota check, written once. The account checks
of each cloud live in its folder (``clouds/<cloud>/doctor.py``, with its quota API) and
are registered by its spec (``CloudSpec.doctor_module``); ``run`` runs them.
"""

from __future__ import annotations

from imagectl.doctor.findings import BLOCKER, OK, WARNING, Finding

__all__ = ["BLOCKER", "OK", "WARNING", "Finding"]
