"""The in-toto Statement v1 that says an image passed validation.

Statement layout: https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md.
Subjects (``ResourceDescriptor``: a name and a digest set):

- the cloud image, named by its full identity (``image:`` +
  ``imagectl.validators.identity.ImageRef.text()``: AWS ``aws/<region>/<account>/<ami>``,
  Google Cloud ``gcp/projects/<p>/global/images/<name>@<numeric id>``, Azure
  ``azure/<the version's full resource id>``, the local cloud ``local/<region>/<id>``),
  and one such subject per region's copy once the promotion made them (the promotion
  signs the statement again with its copies). Cloud image ids are assigned by the cloud
  and not content addresses, so each digest is the sha256 of that name: it binds the
  statement to exactly those images;
- the stack, named ``stack:<name>``, digest its stack digest (the pins it was built from);
- the image manifest (``/etc/imagectl/manifest.json``), digest the sha256 of the copy the
  build fetched into its build folder (``Build.manifest_sha256``), never what a host
  reported. The manifest carries the build id and a per-build nonce, so two builds never
  share it; the boot unit compares it with the manifest on the node.

The predicate is the verdict, the build id, the base image the build started from (its
cloud id: two builds of one stack digest on different bases are told apart) and the
receipts the verdict rests on.
"""

from __future__ import annotations

from imagectl.validators.attestation import (
    MANIFEST_SUBJECT,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    name_digest,
)


def image_subject_name(
    cloud: str, region: str, cloud_image_id: str, identity: str | None = None
) -> str:
    """``image:`` + the full identity the cloud gave (``Provider.image_identity``), else
    the catalog's own ``<cloud>/<region>/<id>``."""
    return f"image:{identity}" if identity else f"image:{cloud}/{region}/{cloud_image_id}"


def build_statement(
    *,
    cloud: str,
    region: str,
    cloud_image_id: str,
    stack: str,
    stack_digest: str,
    manifest_sha256: str | None,
    build_id: str | None,
    receipts: list[dict[str, object]],
    verdict: str,
    attested_by: str,
    attested_at: str,
    copies: list[tuple[str, str]] | None = None,
    base_image: dict[str, object] | None = None,
    identities: dict[tuple[str, str], str] | None = None,
) -> dict[str, object]:
    """``copies``: (region, cloud image id) of each promoted copy; ``base_image``: the
    build's base (``BaseImage.to_dict()``), None for builds recorded before it was;
    ``identities``: (region, cloud image id) -> the full identity the cloud gave."""
    copies = copies or []
    ids = identities or {}
    names = [image_subject_name(cloud, region, cloud_image_id, ids.get((region, cloud_image_id)))]
    names += [image_subject_name(cloud, r, i, ids.get((r, i))) for r, i in copies]
    subjects: list[dict[str, object]] = [
        {"name": n, "digest": {"sha256": name_digest(n)}} for n in dict.fromkeys(names)
    ]
    subjects.append({"name": f"stack:{stack}", "digest": {"sha256": stack_digest}})
    if manifest_sha256:
        subjects.append({"name": MANIFEST_SUBJECT, "digest": {"sha256": manifest_sha256}})
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
                "build_id": build_id,
                "base_image": base_image,
                "copies": [{"region": r, "id": i} for r, i in copies],
            },
            "receipts": receipts,
            "attested_by": attested_by,
            "attested_at": attested_at,
        },
    }
