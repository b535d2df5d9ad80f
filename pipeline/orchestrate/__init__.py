"""Orchestrations of the stages: ``imagectl run`` (``run``) builds, validates and promotes
through the same stage functions as ``imagectl build``, ``validate-image`` and
``promote``."""
