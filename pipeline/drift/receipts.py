"""Read host facts out of a boot-check receipt and an image manifest.

This is the one place that knows their layout. Receipts come from the validator
(``imagectl.validators.receipt``): identity at the top (``image_id``, ``stack``,
``stack_digest``, ``cloud``, ``region``, ``host``) and facts under ``host`` / ``facts``
(``driver``, ``nccl``, ``kernel``, ``fabric_manager``; a fact may be an object with a
``version``). Manifests (``/etc/imagectl/manifest.json``) hold the same names at the top
or under ``versions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imagectl.errors import UserError

_ALIASES = {
    "driver": ("driver", "driver_version", "nvidia_driver", "nvidia_module"),
    "fabric_manager": ("fabric_manager", "fabricmanager", "nvidia_fabricmanager"),
    "nccl": ("nccl", "nccl_version", "libnccl2"),
    "kernel": ("kernel", "kernel_release", "uname_r"),
}


@dataclass(frozen=True)
class HostFacts:
    label: str
    image_id: str | None = None
    stack: str | None = None
    stack_digest: str | None = None
    cloud: str | None = None
    region: str | None = None
    host: str | None = None
    driver: str | None = None
    fabric_manager: str | None = None
    nccl: str | None = None
    kernel: str | None = None


def _version(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("version")
    return None if value in (None, "") else str(value)


def _pick(sections: list[dict[str, Any]], field: str) -> str | None:
    for section in sections:
        for key in _ALIASES[field]:
            if key in section and (v := _version(section[key])) is not None:
                return v
    return None


def _facts(doc: dict[str, Any], label: str, sections: list[dict[str, Any]]) -> HostFacts:
    ident = {k: doc.get(k) for k in ("image_id", "stack", "stack_digest", "cloud", "region")}
    host = doc.get("hostname") or doc.get("host") if isinstance(doc.get("host"), str) else None
    return HostFacts(
        label=label,
        image_id=_str(ident["image_id"]),
        stack=_str(ident["stack"]),
        stack_digest=_str(ident["stack_digest"]),
        cloud=_str(ident["cloud"]),
        region=_str(ident["region"]),
        host=_str(host or doc.get("hostname")),
        **{f: _pick(sections, f) for f in _ALIASES},
    )


def _str(v: Any) -> str | None:
    return None if v in (None, "") else str(v)


def receipt_facts(doc: dict[str, Any], label: str) -> HostFacts:
    sections = [s for s in (doc.get("facts"), doc.get("host"), doc) if isinstance(s, dict)]
    facts = _facts(doc, label, sections)
    if facts.image_id is None and facts.stack is None:
        raise UserError(
            f"{label}: corrupt boot-check receipt: it names neither image_id nor stack",
            hint="Collect /var/lib/imagectl/boot-receipt.json from the node again",
        )
    return facts


def manifest_facts(doc: dict[str, Any], label: str) -> HostFacts:
    sections = [s for s in (doc.get("versions"), doc.get("pins"), doc) if isinstance(s, dict)]
    return _facts(doc, label, sections)
