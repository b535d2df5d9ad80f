"""What moto lacks for ``imagectl doctor`` on AWS: the sandbox's own completion of moto
(``imagectl.clouds.aws.sandbox_doctor``: IAM ``SimulatePrincipalPolicy`` with conditions
evaluated against ``ContextEntries`` as IAM does, EC2 ``GetEbsDefaultKmsKeyId``, Service
Quotas for EC2), so the tests and the README's sandbox answer the doctor alike. Tests set
``EC2_QUOTAS`` / ``EBS_DEFAULT_KEYS``; an enforced identity's shipped document is kept in
``SHIPPED`` (tests/fakes/permissions.py) for the simulation."""

from __future__ import annotations

from imagectl.clouds.aws.sandbox_doctor import (
    DEFAULT_VCPUS,
    EBS_DEFAULT_KEYS,
    EC2_QUOTAS,
    NAMES,
    SHIPPED,
    decide,
    evaluate,
    install,
)

__all__ = [
    "DEFAULT_VCPUS", "EBS_DEFAULT_KEYS", "EC2_QUOTAS", "NAMES", "SHIPPED", "decide",
    "evaluate", "install",
]  # fmt: skip
