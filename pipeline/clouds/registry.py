"""Every cloud imagectl knows, by name: ``cloud_spec(name)`` and ``get_provider``.

Adding a cloud is a folder ``pipeline/clouds/<name>/`` with ``spec.py`` and
``provider.py``, a section in the stack schema, a template folder ``images/<name>/``,
and one line here.
"""

from __future__ import annotations

import importlib
from typing import Any

from imagectl.cloud_names import CLOUDS, REMOTE_CLOUDS
from imagectl.clouds.aws.spec import SPEC as AWS
from imagectl.clouds.azure.spec import SPEC as AZURE
from imagectl.clouds.base import Provider
from imagectl.clouds.gcp.spec import SPEC as GCP
from imagectl.clouds.local.spec import SPEC as LOCAL
from imagectl.clouds.spec import CloudSpec, ProviderOptions
from imagectl.core.errors import UserError

SPECS: dict[str, CloudSpec[Any]] = {s.name: s for s in (AWS, GCP, AZURE, LOCAL)}
assert tuple(SPECS) == CLOUDS, "imagectl.cloud_names and the specs differ"
assert tuple(n for n, s in SPECS.items() if s.remote) == REMOTE_CLOUDS, "remote clouds differ"


def cloud_spec(name: str) -> CloudSpec[Any]:
    spec = SPECS.get(name)
    if spec is None:
        raise UserError(f"unknown cloud '{name}'", hint=f"Use one of {', '.join(SPECS)}")
    return spec


def spec_for_builder(builder_type: str) -> CloudSpec[Any] | None:
    """The cloud whose template uses Packer builder ``builder_type`` (amazon-ebs...)."""
    return next((s for s in SPECS.values() if s.packer_builder == builder_type), None)


def get_provider(spec: CloudSpec[Any], options: ProviderOptions | None = None) -> Provider:
    """The cloud's Provider, built from its typed options (``CloudSpec.options_type``;
    none: its defaults, enough for the local cloud only); the SDK is imported here, not
    before (``--help`` stays fast). A name from the command line or a catalog row becomes
    a spec once, with ``cloud_spec``."""
    if options is None:
        options = spec.options_type()
    if not isinstance(options, spec.options_type):
        wanted, got = spec.options_type.__name__, type(options).__name__
        raise TypeError(f"{spec.name} takes {wanted}, not {got}")
    module = importlib.import_module(spec.provider_module)
    provider: Provider = module.create_provider(options)
    return provider
