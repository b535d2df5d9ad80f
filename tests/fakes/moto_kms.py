"""KMS ``Sign`` with ``MessageType=DIGEST``, which moto (5.x) does not implement.

moto ignores ``MessageType`` and always hashes ``Message`` again ("The MessageType-
parameter DIGEST is not yet implemented", moto's KmsBackend.verify docstring), so a
client that sends a digest, as securesystemslib's AWSSigner does, gets a signature over
the hash of the digest that no verifier accepts. KMS's own contract (API reference,
Sign: "MessageType: Tells AWS KMS whether the value of the Message parameter should be
hashed as part of the signing algorithm. Use RAW for unhashed messages; use DIGEST for
message digests, which are already hashed [...] When the value of MessageType is DIGEST,
the length of the Message value must match the length of hashed messages for the
specified signing algorithm"): a DIGEST is signed as given (prehashed), and a digest of
the wrong length is a ValidationException. RSASSA-PSS uses a salt as long as the digest
(KMS Developer Guide, "Asymmetric key specs", RSA key specs for signing). Installed on
moto's response class, so boto3 reaches it through moto's own request parsing.
"""

from __future__ import annotations

import base64
import json
from typing import Any


def install() -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
    from moto.kms.exceptions import ValidationException
    from moto.kms.responses import KmsResponse

    if getattr(KmsResponse, "_imagectl_digest", False):
        return
    raw_sign = KmsResponse.sign

    def sign(self: Any) -> str:
        if self._get_param("MessageType") != "DIGEST":
            return raw_sign(self)  # type: ignore[no-any-return]
        key_id = self._get_param("KeyId")
        algorithm = str(self._get_param("SigningAlgorithm"))
        digest = self._get_param("Message")  # moto's KMS responses decode blobs to bytes
        key = self.kms_backend.describe_key(key_id)
        hash_alg = getattr(hashes, "SHA" + algorithm[-3:])()  # every algorithm ends 256/384/512
        if len(digest) != hash_alg.digest_size:
            raise ValidationException(f"Digest is invalid length for algorithm {algorithm}.")
        if algorithm not in key.signing_algorithms:
            raise ValidationException(f"Signing algorithm {algorithm} is not valid for this key")
        private = key.private_key.private_key  # moto's wrapper holds the cryptography key
        if algorithm.startswith("ECDSA"):
            signature = private.sign(digest, ec.ECDSA(Prehashed(hash_alg)))
        elif algorithm.startswith("RSASSA_PSS"):
            pss = padding.PSS(mgf=padding.MGF1(hash_alg), salt_length=hash_alg.digest_size)
            signature = private.sign(digest, pss, Prehashed(hash_alg))
        else:
            signature = private.sign(digest, padding.PKCS1v15(), Prehashed(hash_alg))
        return json.dumps(
            {
                "KeyId": key.arn,
                "Signature": base64.b64encode(signature).decode(),
                "SigningAlgorithm": algorithm,
            }
        )

    KmsResponse.sign = sign  # type: ignore[method-assign]
    KmsResponse._imagectl_digest = True  # type: ignore[attr-defined]
