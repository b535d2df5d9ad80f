"""The image id from the cloud's instance metadata service (only on a cloud VM).

Asked only when DMI names the cloud, with short timeouts, so a host elsewhere pays
nothing. Which cloud a DMI vendor is, and how its metadata names the booted image, is
data (``data/clouds.yaml``, read by ``imagectl.validators.host.clouds``): an HTTP session
token first where the cloud wants one (AWS IMDSv2), then each field by HTTP GET with the
cloud's headers, or from a file (the local cloud's QEMU fw_cfg entry, absent on a QEMU VM
imagectl did not launch). A structured answer is read by its format
(``arm_image_reference``), never by the cloud's name.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from pathlib import Path

from imagectl.core.boundedjson import parse_bounded
from imagectl.validators.host.clouds import Metadata, cloud_hints

TIMEOUT_S = 0.5
SYS_VENDOR = Path("/sys/class/dmi/id/sys_vendor")


def _get(url: str, headers: dict[str, str], method: str = "GET") -> str:
    req = urllib.request.Request(url, headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
        body: bytes = resp.read()
        return body.decode()


def _arm_image_reference(raw: str) -> str:
    """ARM's ImageReference (IMDS ``compute/storageProfile/imageReference``): the image
    id, the gallery version a VM made from a definition booted (``exactVersion``,
    read-only), or publisher:offer:sku:version for a marketplace image."""
    ref = parse_bounded(
        raw, kind="IMDS image reference", where="the instance metadata service", hint="",
        max_bytes=1 << 16, max_depth=8,
    )  # fmt: skip
    if not isinstance(ref, dict):
        raise ValueError("the image reference is not an object")
    image = str(ref.get("id") or "")
    exact = ref.get("exactVersion")
    if image and exact and "/versions/" not in image.lower():
        image = f"{image.rstrip('/')}/versions/{exact}"
    return image or ":".join(str(ref.get(k, "")) for k in ("publisher", "offer", "sku", "version"))


# how a field's body is read, by format (clouds.yaml's ``format``)
FORMATS: dict[str, Callable[[str], str]] = {
    "": str.strip,
    "arm_image_reference": _arm_image_reference,
}


def _read(metadata: Metadata) -> dict[str, object] | None:
    """Each field the cloud's metadata gives; None when a field's file is absent."""
    headers = dict(metadata.headers)
    if metadata.token is not None:
        t = metadata.token
        headers[t.header] = _get(t.url, t.headers, method=t.method).strip()
    out: dict[str, object] = {}
    for name, source in metadata.fields.items():
        if source.file:
            path = Path(source.file)
            if not path.exists():
                return None
            raw = path.read_text()
        else:
            raw = _get(source.url, headers)
        out[name] = FORMATS[source.format](raw)
    return out


def cloud_image_id(sys_vendor: str) -> dict[str, object]:
    vendor = sys_vendor.strip()
    clouds = cloud_hints().clouds
    try:
        for cloud, hints in clouds.items():
            if vendor.startswith(hints.dmi_vendor):
                got = _read(hints.metadata)
                return {"cloud": None, "image_id": None} if got is None else {"cloud": cloud, **got}
    except Exception as exc:  # metadata is best effort: the receipt says why it is absent
        return {"cloud": None, "image_id": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"cloud": None, "image_id": None}


def booted_image() -> dict[str, object]:
    """The image this instance booted from, as its cloud's metadata says (verify-node)."""
    try:
        vendor = SYS_VENDOR.read_text()
    except OSError:
        vendor = ""
    return cloud_image_id(vendor)
