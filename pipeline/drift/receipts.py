"""Read host facts out of a validation receipt and expected facts out of an image manifest.

This is the one place that knows both layouts:

- Receipt (``imagectl validate``, the node's boot check writes
  ``/var/lib/imagectl/boot-receipt.json``; the model is
  ``imagectl.validators.receipt.Receipt``, validated before it gets here): identity at
  the top (``image_id``, ``stack``, ``stack_digest``), the host summary under ``host``
  (``hostname``, ``cloud``, ``kernel``, ``driver_module``) and what each software check
  measured under ``checks``
  (``sw.driver.version``, ``sw.fabricmanager.version``, ``sw.nccl.version``,
  ``sw.kernel.release``).
- Manifest (``/etc/imagectl/manifest.json``, written at build time by the ``manifest``
  role from ground truth; the model is ``imagectl.validators.manifest.ImageManifest``):
  ``driver``, ``fabric_manager``, ``nccl``, ``kernel`` as fields (an older schema-1
  manifest names the driver only inside its package names, which the model reads).

Versions are compared without Debian revisions (``580.95.05-1`` -> ``580.95.05``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from imagectl.core.errors import UserError
from imagectl.core.versions import upstream_version
from imagectl.validators.manifest import parse_manifest
from imagectl.validators.receipt import Receipt

CHECKS = {
    "driver": "sw.driver.version",
    "fabric_manager": "sw.fabricmanager.version",
    "nccl": "sw.nccl.version",
    "kernel": "sw.kernel.release",
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


def upstream(version: object) -> str | None:
    """``1:580.95.05-0ubuntu1`` -> ``580.95.05``; ``2.26.2-1+cuda12.8`` -> ``2.26.2``."""
    if version in (None, ""):
        return None
    text = str(version)
    return upstream_version(text) if re.match(r"^(\d+:)?\d", text) else text


def _str(v: object) -> str | None:
    return None if v in (None, "") else str(v)


def receipt_facts(receipt: Receipt, label: str) -> HostFacts:
    measured = {c.id: c.measured for c in receipt.checks}
    host = receipt.host

    def fact(field: str, fallback: object) -> str | None:
        value = measured.get(CHECKS[field])
        if isinstance(value, (str, int, float)) and value != "":
            return str(value)
        return _str(fallback)

    return HostFacts(
        label=label,
        image_id=_str(receipt.image_id),
        stack=_str(receipt.stack),
        stack_digest=_str(receipt.stack_digest),
        cloud=_str(host.get("cloud")),
        region=_str(host.get("region")),
        host=_str(host.get("hostname")),
        driver=upstream(fact("driver", host.get("driver_module"))),
        fabric_manager=upstream(fact("fabric_manager", None)),
        nccl=upstream(fact("nccl", None)),
        kernel=fact("kernel", host.get("kernel")),
    )


def manifest_facts(doc: dict[str, object], label: str) -> HostFacts:
    try:
        manifest = parse_manifest(doc)
    except ValueError as exc:
        raise UserError(
            f"{label}: not an image manifest: {exc}",
            hint="Use /etc/imagectl/manifest.json from the image (written by the manifest role)",
        ) from exc
    if not manifest.packages or not (manifest.stack_digest or manifest.image_id):
        raise UserError(
            f"{label}: not an image manifest: it needs 'packages' and 'stack_digest'",
            hint="Use /etc/imagectl/manifest.json from the image (written by the manifest role)",
        )
    return HostFacts(
        label=label,
        image_id=manifest.image_id,
        stack=manifest.stack,
        stack_digest=manifest.stack_digest,
        cloud=manifest.cloud,
        driver=upstream(manifest.driver_version),
        fabric_manager=upstream(manifest.fabric_manager_version),
        nccl=upstream(manifest.nccl_version),
        kernel=manifest.kernel,
    )
