"""Every cloud imagectl knows, by name: ``cloud_names()``, ``cloud_spec(name)`` and
``get_provider``. The one list of clouds: the stack schema's ``clouds:`` sections, the
CLI's ``--cloud`` choices and every per-cloud fact come from here.

A cloud is its folder. A cloud shipped with imagectl is ``pipeline/clouds/<name>/`` with
``spec.py`` (its ``CloudSpec``: Packer builder and variables, provider options, image
scope...), ``stack.py`` (its stack section: model, location checks, fabrics; the spec's
``section``), ``provider.py`` (the SDK layer), a template folder ``images/<name>/``, and
one line in ``BUILTIN`` below.

A cloud can also come from outside the package: a distribution that declares an entry
point in the ``imagectl.clouds`` group, named for the cloud and pointing at its spec
object (``oracle = imagectl_oracle.spec:SPEC`` in its ``entry_points.txt``). Its spec
names where its Packer templates live (``CloudSpec.templates``) and may bring validation
shapes (``CloudSpec.shapes_file``). Nothing outside that distribution is edited.

Nothing is imported before it is needed: ``cloud_names`` reads the builtin names and the
entry points' names (installed metadata, no import), and the specs are imported on the
first ``specs()`` / ``cloud_spec`` (no SDK: ``get_provider`` imports that), so
``imagectl --help`` stays fast. ``stack_sections()`` fills the stack schema's sections hook
(``imagectl.stacks.sections``): the dependency runs clouds -> stacks.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib import metadata
from typing import TYPE_CHECKING, Any

from imagectl.core.errors import UserError

if TYPE_CHECKING:  # imported when a spec is loaded: cloud_names() stays light (--help)
    from imagectl.clouds.base import Provider
    from imagectl.clouds.spec import CloudSpec, ProviderOptions
    from imagectl.stacks.sections import CloudSection

# The clouds shipped with imagectl: name -> "module:attribute" of its spec, in the order
# they are listed everywhere (the same form as an entry point's value).
BUILTIN: dict[str, str] = {
    "aws": "imagectl.clouds.aws.spec:SPEC",
    "gcp": "imagectl.clouds.gcp.spec:SPEC",
    "azure": "imagectl.clouds.azure.spec:SPEC",
    "local": "imagectl.clouds.local.spec:SPEC",
}
# The cloud whose images are QEMU disks on this machine (``imagectl run``, the embedded
# pipeline): the one cloud code outside its folder names, and it names it through here.
ON_THIS_MACHINE = "local"
ENTRY_POINT_GROUP = "imagectl.clouds"


@lru_cache(maxsize=1)
def _entry_points() -> tuple[metadata.EntryPoint, ...]:
    return tuple(sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name))


def cloud_names() -> tuple[str, ...]:
    """Every registered cloud's name (builtin first), without importing any."""
    extra = [ep.name for ep in _entry_points() if ep.name not in BUILTIN]
    return (*BUILTIN, *extra)


def _origin(ep: metadata.EntryPoint) -> str:
    dist = ep.dist.name if ep.dist is not None else "an installed distribution"
    return f"entry point '{ep.name} = {ep.value}' of {dist} (group {ENTRY_POINT_GROUP})"


def _load(name: str, target: str, origin: str) -> CloudSpec[Any]:
    from imagectl.clouds.spec import CloudSpec
    from imagectl.validators.shapes import add_shape_file

    module_name, _, attr = target.partition(":")
    try:
        spec = getattr(importlib.import_module(module_name), attr or "SPEC")
    except (ImportError, AttributeError) as exc:
        raise UserError(
            f"cloud '{name}' cannot be loaded from {origin}: {exc}",
            hint="Install the distribution that provides it again, or uninstall it",
        ) from exc
    problem = ""
    if not isinstance(spec, CloudSpec):
        problem = f"{target} is a {type(spec).__name__}, not a CloudSpec"
    elif spec.name != name:
        problem = f"its spec is named '{spec.name}'"
    elif getattr(spec, "section", None) is None or spec.section.name != name:
        problem = "its spec has no stack section of that name (CloudSpec.section)"
    if problem:
        raise UserError(
            f"cloud '{name}' from {origin} is not usable: {problem}",
            hint="A cloud's entry point names its CloudSpec instance, whose name and "
            "section.name are the entry point's name",
        )
    if spec.shapes_file is not None:  # its validation shapes join the shape table
        add_shape_file(spec.shapes_file)
    return spec


@lru_cache(maxsize=1)
def specs() -> dict[str, CloudSpec[Any]]:
    """Every registered cloud's spec, by name (builtin first, then the entry points')."""
    found = {name: _load(name, target, "imagectl") for name, target in BUILTIN.items()}
    for ep in _entry_points():
        if ep.name in found:
            raise UserError(
                f"cloud '{ep.name}' is registered twice: by imagectl and by {_origin(ep)}",
                hint="Uninstall the distribution, or register its cloud under another name",
            )
        found[ep.name] = _load(ep.name, ep.value, _origin(ep))
    return found


def remote_cloud_names() -> tuple[str, ...]:
    """The real clouds (reaped, tagged): every cloud but the one on this machine."""
    return tuple(name for name, spec in specs().items() if spec.remote)


def cloud_spec(name: str) -> CloudSpec[Any]:
    """The spec of cloud ``name``: a name from the command line or a catalog row becomes
    a spec once, here (an unknown name is a UserError listing the registered ones)."""
    spec = specs().get(name) if name in cloud_names() else None
    if spec is None:
        raise UserError(
            f"unknown cloud '{name}'",
            hint=f"Use one of {', '.join(cloud_names())} (a cloud from outside imagectl "
            f"registers through the '{ENTRY_POINT_GROUP}' entry point group)",
        )
    return spec


def spec_for_builder(builder_type: str) -> CloudSpec[Any] | None:
    """The cloud whose template uses Packer builder ``builder_type`` (amazon-ebs...)."""
    return next((s for s in specs().values() if s.packer_builder == builder_type), None)


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


def stack_sections() -> dict[str, CloudSection]:
    """Each registered cloud's stack section, by name: what fills the stack schema's
    ``clouds:`` (``imagectl.stacks.sections``, which asks here on first use)."""
    return {name: spec.section for name, spec in specs().items()}
