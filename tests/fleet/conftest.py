"""Fixtures of the fleet tests: the promotion tests' ``world`` (a catalog, the local
cloud's registry and the ``local`` stack) for the rollout's canary and decisions."""

from __future__ import annotations

from tests.promotion.conftest import world  # noqa: F401
