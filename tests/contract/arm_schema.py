"""The Azure Compute REST API description available offline: ``azure-mgmt-compute``'s
models, generated from Azure's REST specs (TypeSpec). Each field keeps its REST name
and its visibility (``["read"]`` alone: the service sets it, a client never sends it)."""

from __future__ import annotations

import functools
import typing
from typing import Any


def _model_of(hint: Any) -> Any:
    from azure.mgmt.compute._utils.model_base import Model

    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and issubclass(arg, Model):
            return arg
        for inner in typing.get_args(arg):  # list[Model]
            if isinstance(inner, type) and issubclass(inner, Model):
                return inner
    return None


@functools.cache
def fields(model: Any) -> dict[str, tuple[list[str], Any]]:
    """REST name -> (visibility, nested model class or None)."""
    from azure.mgmt.compute import models
    from azure.mgmt.compute.models import _models

    model()  # the SDK computes its field table on first construction
    hints = typing.get_type_hints(model, globalns=vars(_models), localns={"_models": models})
    return {
        rf._rest_name: (list(rf._visibility or []), _model_of(hints.get(attr)))
        for attr, rf in model._attr_to_rest_field.items()
    }


def problems(body: Any, model: Any, *, direction: str, path: str = "") -> list[str]:
    if not isinstance(body, dict):
        return []
    table = fields(model)
    found: list[str] = []
    for key, value in body.items():
        where = f"{path}{model.__name__}.{key}"
        if key not in table:
            found.append(f"{where}: not a field of {model.__name__}")
            continue
        visibility, nested = table[key]
        if direction == "request" and visibility == ["read"]:
            found.append(f"{where}: read-only, sent in a request")
        if nested is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            found += problems(item, nested, direction=direction, path=f"{where} > ")
    return found
