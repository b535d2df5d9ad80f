"""google-cloud-compute's ``compute_v1`` package, loaded name by name.

``google/cloud/compute_v1/__init__.py`` imports every one of its ~100 service clients
(accelerator types to zone operations), about 1.1 s of CPU in every process that touches
Google Cloud, of which imagectl uses about ten clients and the shared message types. This
module puts a package object in its place (the same ``__path__``, so every submodule
imports exactly as before) whose names load on first use (PEP 562 ``__getattr__``):

- ``<Name>Client`` from ``compute_v1.services.<name>`` (``ImagesClient`` from
  ``services.images``, ``GlobalOperationsClient`` from ``services.global_operations``),
  the module the package's own ``__init__`` takes it from;
- a message type (``Image``, ``Operation``...) from ``compute_v1.types.compute``;
- a submodule (``gapic_version``, ``types``) as that submodule;
- anything else (``__all__``, ``__version__``, a client whose module is named otherwise):
  the package's real ``__init__`` runs into the same object, once, and answers.

``from google.cloud import compute_v1`` anywhere in the process then finds this package,
lean or loaded. When the package was imported already, it is used as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
import types
from typing import Any

NAME = "google.cloud.compute_v1"
_lock = threading.RLock()


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def _lean_package() -> types.ModuleType:
    spec = importlib.util.find_spec(NAME)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return importlib.import_module(NAME)  # not a package here: the usual import (or error)
    package = types.ModuleType(NAME)
    package.__spec__ = spec
    package.__loader__ = spec.loader
    package.__file__ = spec.origin
    package.__package__ = NAME
    package.__path__ = list(spec.submodule_search_locations)
    loaded = False

    def load_all() -> None:
        nonlocal loaded
        with _lock:
            if not loaded:
                loaded = True
                assert spec.loader is not None
                spec.loader.exec_module(package)

    def lean(name: str) -> Any:
        """``name`` from the module the package's ``__init__`` takes it from (None when it
        is not there)."""
        if name.endswith("Client"):
            module, attr = f"{NAME}.services.{_snake(name[: -len('Client')])}", name
        elif name[:1].isupper():
            module, attr = f"{NAME}.types.compute", name
        else:  # a submodule (gapic_version, services, types): imported as one
            module, attr = f"{NAME}.{name}", ""
        try:
            found = importlib.import_module(module)
            return getattr(found, attr) if attr else found
        except (ModuleNotFoundError, AttributeError):
            return None

    def resolve(name: str) -> Any:
        if not loaded and not name.startswith("__"):
            with _lock:
                value = package.__dict__.get(name)  # another thread's, while this one waited
                if value is None:
                    value = lean(name)
                if value is not None:
                    setattr(package, name, value)
                    return value
        load_all()
        if name in package.__dict__:
            return package.__dict__[name]
        raise AttributeError(f"module {NAME!r} has no attribute {name!r}")

    package.__getattr__ = resolve  # type: ignore[method-assign]
    return package


def compute_v1() -> Any:
    """The ``google.cloud.compute_v1`` package (installed lean on the first call)."""
    with _lock:
        found = sys.modules.get(NAME)
        if found is None:
            import google.cloud

            found = _lean_package()
            sys.modules[NAME] = found
            google.cloud.compute_v1 = found  # type: ignore[attr-defined]
        return found
