"""What moto lacks for ``imagectl doctor`` on AWS: the sandbox's own completion of moto
(``imagectl.clouds.aws.sandbox_doctor``: IAM ``SimulatePrincipalPolicy`` with conditions
evaluated against ``ContextEntries`` as IAM does, EC2 ``GetEbsDefaultKmsKeyId``, Service
Quotas for EC2), so the tests and the docs' sandbox answer the doctor alike. Tests set
``EC2_QUOTAS`` / ``EBS_DEFAULT_KEYS``; an enforced identity's shipped document is kept in
``SHIPPED`` (tests/fakes/permissions.py) for the simulation. ``account`` is moto in process
answering the doctor, for a test's block."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

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
from tests.fakes.fixtures import fake_aws_credentials


@contextlib.contextmanager
def account(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto in process, completed for the doctor (``install``): its fake credentials in the
    environment, no endpoint override or profile, and the quotas and default EBS keys a
    test sets cleared before and after."""
    from moto import mock_aws

    fake_aws_credentials(monkeypatch)
    for key in ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    install()
    EC2_QUOTAS.clear()
    EBS_DEFAULT_KEYS.clear()
    try:
        with mock_aws():
            yield
    finally:
        EC2_QUOTAS.clear()
        EBS_DEFAULT_KEYS.clear()


__all__ = [
    "DEFAULT_VCPUS", "EBS_DEFAULT_KEYS", "EC2_QUOTAS", "NAMES", "SHIPPED", "account", "decide",
    "evaluate", "install",
]  # fmt: skip
