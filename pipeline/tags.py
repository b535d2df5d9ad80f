"""Every tag key imagectl writes on images and instances, and their GCP label encoding:
the one place either is spelt.

Tags are ``imagectl:<name>`` on AWS, Azure and the local registry. Google Cloud labels
allow no ':' and only lowercase letters, digits, '-' and '_', at most 63 characters
("Labels: requirements", Resource Manager docs), so a key is written
``imagectl-<name>`` and a value is lower-cased with every other character replaced by
'-' (``gcp_label_key`` / ``gcp_label_value``; times as ``20261122t051000z`` in
``imagectl.clouds.gcp.labels``). Nothing here imports a cloud SDK.
"""

from __future__ import annotations

import re

PREFIX = "imagectl"

# images and instances imagectl manages
TAG_MANAGED = "imagectl:managed"
TAG_STACK = "imagectl:stack"
TAG_DIGEST = "imagectl:stack-digest"
TAG_STATE = "imagectl:state"
TAG_BUILD = "imagectl:build-id"
TAG_TTL = "imagectl:expires-at"  # ISO-8601 UTC; the reaper terminates after it
TAG_LAUNCHED_BY = "imagectl:launched-by"
# instances: the image they were launched from; replicas: their source and copy token
TAG_IMAGE = "imagectl:image"
TAG_SOURCE_IMAGE = "imagectl:source-image"
TAG_REPLICA_TOKEN = "imagectl:replica-token"
# deprecation (AWS, Azure)
TAG_DEPRECATED_AT = "imagectl:deprecated-at"
TAG_REPLACEMENT = "imagectl:replacement"
# provenance: the signed attestation of the image's validation (imagectl.provenance);
# sha256-<hex> of its DSSE envelope (a GCP label keeps the first 56 hex digits)
TAG_ATTESTATION = "imagectl:attestation"
# its signed revocation (imagectl revoke): sha256-<hex> of the revocation's envelope
TAG_REVOKED = "imagectl:revoked"
# the canary pointer on Azure: "true" on the gallery version the canary names
TAG_CANARY = "imagectl:canary"

# the tags every candidate artifact carries (imagectl.packer.variables.artifact_tags),
# written in each cloud's encoding by its CloudSpec.tags
ARTIFACT_TAG_NAMES = (
    "stack",
    "stack-digest",
    "driver",
    "cuda",
    "nccl",
    "build-id",
    "git-commit",
    "lifecycle",
)

_LABEL_OK = re.compile(r"[^a-z0-9_-]")


def gcp_label_key(key: str) -> str:
    """``imagectl:expires-at`` -> ``imagectl-expires-at`` (GCP label keys allow no ':')."""
    return _LABEL_OK.sub("-", key.lower())[:63]


def gcp_label_value(value: str | None) -> str:
    """A GCP label value: lowercase letters, digits, '-' and '_', at most 63 characters;
    ``None`` is written ``none``."""
    if value is None:
        return "none"
    return _LABEL_OK.sub("-", str(value).lower())[:63]
