"""Provenance: signed attestations that an image passed validation.

- ``statement.py``: the in-toto Statement v1 for a validated image (subjects: the cloud
  image, the stack digest, the image manifest; predicate: the verdict and the receipts).
- ``keys.py``: the signer (a local key file, AWS KMS, Google Cloud KMS, Azure Key Vault,
  through securesystemslib's signer URIs) and the trusted public keys.
- ``attest.py``: sign a statement into a DSSE envelope and record it (catalog, a file
  beside the catalog, a tag on the image).
- ``verify.py``: check an image's attestation: signature by a trusted key, subject, stack
  digest, verdict, and the catalog's receipts against the attested ones.
"""
