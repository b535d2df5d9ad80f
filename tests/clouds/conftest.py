"""Cloud tests use the protocol fakes in tests/fakes (moto, Compute REST, ARM)."""

from tests.fakes.fixtures import (  # noqa: F401  (fixtures)
    aws_moto,
    azure_fake,
    cloud_env,
    fast_polling,
    gcp_fake,
    moto_server,
)
