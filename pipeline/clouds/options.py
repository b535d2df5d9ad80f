"""Provider options from a stack's per-cloud settings: one mapping, used by build,
validate-image, reap and promotion alike (the cloud's ``CloudSpec.provider_options``).

``IMAGECTL_CLOUD_POLL_S`` shortens every provider's polling interval (tests and the
local emulators set it to 0); endpoints come from the providers' own variables
(``IMAGECTL_AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL``, ``IMAGECTL_GCP_ENDPOINT``,
``IMAGECTL_AZURE_ENDPOINT``).
"""

from __future__ import annotations

from typing import Any

from imagectl.clouds.spec import CloudSpec, ProviderOptions
from imagectl.settings import env_seconds
from imagectl.stacks.resolve import ResolvedStack

ENV_POLL = "IMAGECTL_CLOUD_POLL_S"


def provider_options(resolved: ResolvedStack, spec: CloudSpec[Any]) -> ProviderOptions:
    opts = spec.provider_options(spec.settings(resolved.stack))
    value = env_seconds(ENV_POLL)
    return opts.polled(value) if value is not None else opts
