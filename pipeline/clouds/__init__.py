"""One provider per cloud behind one interface (``base.Provider``).

``get_provider(cloud, **options)`` imports the cloud's SDK lazily: ``imagectl --help``
and commands that never touch a cloud never import boto3, google-cloud or azure.
"""

from __future__ import annotations

import importlib
from typing import Any

from imagectl.clouds.base import Provider

_MODULES = {
    "aws": "imagectl.clouds.aws",
    "gcp": "imagectl.clouds.gcp",
    "azure": "imagectl.clouds.azure",
    "local": "imagectl.clouds.local",
}


def get_provider(cloud: str, **options: Any) -> Provider:
    from imagectl.errors import UserError

    if cloud not in _MODULES:
        raise UserError(f"unknown cloud '{cloud}'", hint=f"Use one of {', '.join(_MODULES)}")
    module = importlib.import_module(_MODULES[cloud])
    provider: Provider = module.create_provider(**options)
    return provider
