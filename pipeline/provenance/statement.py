"""The in-toto Statement v1 that says an image passed validation.

Statement layout: https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md.
Subjects (``ResourceDescriptor``: a name and a digest set):

- the cloud image, named ``image:<cloud>/<region>/<cloud image id>``. Cloud image ids are
  assigned by the cloud and not content addresses, so its digest is the sha256 of that
  name: it binds the statement to exactly one image in one region of one cloud;
- the stack, named ``stack:<name>``, digest its stack digest (the pins it was built from);
- the image manifest (``/etc/imagectl/manifest.json``), digest the sha256 its hosts
  reported in their receipts (``host.manifest_sha256``), when every receipt reported the
  same one; the boot unit compares it with the manifest on the node.

The predicate is the verdict and the receipts the verdict rests on.
"""

from __future__ import annotations

import hashlib
from typing import Any

from imagectl.validators.attestation import MANIFEST_SUBJECT, PREDICATE_TYPE, STATEMENT_TYPE


def image_subject_name(cloud: str, region: str, cloud_image_id: str) -> str:
    return f"image:{cloud}/{region}/{cloud_image_id}"


def name_digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def manifest_digest(receipts: list[dict[str, Any]]) -> str | None:
    """The manifest digest every receipt's host reported, or None (absent or differing)."""
    seen = {str((r.get("host") or {}).get("manifest_sha256") or "") for r in receipts}
    return seen.pop() if len(seen) == 1 and "" not in seen else None


def build_statement(
    *,
    cloud: str,
    region: str,
    cloud_image_id: str,
    stack: str,
    stack_digest: str,
    receipts: list[dict[str, Any]],
    verdict: str,
    attested_by: str,
    attested_at: str,
) -> dict[str, Any]:
    image_name = image_subject_name(cloud, region, cloud_image_id)
    subjects: list[dict[str, Any]] = [
        {"name": image_name, "digest": {"sha256": name_digest(image_name)}},
        {"name": f"stack:{stack}", "digest": {"sha256": stack_digest}},
    ]
    manifest = manifest_digest(receipts)
    if manifest:
        subjects.append({"name": MANIFEST_SUBJECT, "digest": {"sha256": manifest}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "verdict": verdict,
            "image": {
                "cloud": cloud,
                "region": region,
                "id": cloud_image_id,
                "stack": stack,
                "stack_digest": stack_digest,
            },
            "receipts": receipts,
            "attested_by": attested_by,
            "attested_at": attested_at,
        },
    }
