"""The image id from the cloud's instance metadata service (only on a cloud VM).

Asked only when DMI names the cloud, with short timeouts, so a host elsewhere pays
nothing. AWS: IMDSv2 ``ami-id`` and ``placement/region`` (an AMI id is regional);
Google Cloud: ``instance/image``; Azure: the image reference id (or
publisher:offer:sku:version); the local cloud (a QEMU VM): the image id its launch
hands in through QEMU's fw_cfg (``opt/imagectl/image_id``, read from
``/sys/firmware/qemu_fw_cfg``; ``imagectl.clouds.local.qemu``).
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from imagectl.core.boundedjson import parse_bounded

TIMEOUT_S = 0.5
IMDS = "http://169.254.169.254"
FW_CFG_IMAGE_ID = Path("/sys/firmware/qemu_fw_cfg/by_name/opt/imagectl/image_id/raw")
SYS_VENDOR = Path("/sys/class/dmi/id/sys_vendor")


def _get(url: str, headers: dict[str, str], method: str = "GET") -> str:
    req = urllib.request.Request(url, headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
        body: bytes = resp.read()
        return body.decode()


def cloud_image_id(sys_vendor: str) -> dict[str, object]:
    vendor = sys_vendor.strip()
    try:
        if vendor.startswith("Amazon"):
            token = _get(
                f"{IMDS}/latest/api/token",
                {"X-aws-ec2-metadata-token-ttl-seconds": "60"},
                method="PUT",
            )
            ami = _get(f"{IMDS}/latest/meta-data/ami-id", {"X-aws-ec2-metadata-token": token})
            region = _get(
                f"{IMDS}/latest/meta-data/placement/region", {"X-aws-ec2-metadata-token": token}
            )
            return {"cloud": "aws", "image_id": ami.strip(), "region": region.strip()}
        if vendor.startswith("Google"):
            image = _get(
                "http://metadata.google.internal/computeMetadata/v1/instance/image",
                {"Metadata-Flavor": "Google"},
            )
            return {"cloud": "gcp", "image_id": image.strip()}
        if vendor.startswith("Microsoft"):
            raw = _get(
                f"{IMDS}/metadata/instance/compute/storageProfile/imageReference"
                "?api-version=2021-02-01",
                {"Metadata": "true"},
            )
            ref = parse_bounded(
                raw, kind="IMDS image reference", where="Azure IMDS", hint="",
                max_bytes=1 << 16, max_depth=8,
            )  # fmt: skip
            if not isinstance(ref, dict):
                raise ValueError("the image reference is not an object")
            image = ref.get("id") or ""
            exact = ref.get("exactVersion")
            if image and exact and "/versions/" not in image.lower():
                # a VM made from a gallery image definition (its latest version): the
                # version it booted is exactVersion (ARM ImageReference, read-only)
                image = f"{image.rstrip('/')}/versions/{exact}"
            image = image or ":".join(
                str(ref.get(k, "")) for k in ("publisher", "offer", "sku", "version")
            )
            return {"cloud": "azure", "image_id": image}
        if vendor.startswith("QEMU") and FW_CFG_IMAGE_ID.exists():
            return {"cloud": "local", "image_id": FW_CFG_IMAGE_ID.read_text().strip()}
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
