#!/usr/bin/env python3
"""Refuse an OpenPGP key file unless every primary key in it has a pinned fingerprint.

argv: [--write-binary OUT] KEYFILE FINGERPRINT...  (armored or binary; the fingerprints as
hex, any case/spaces). Prints {"primary": [...], "subkeys": [...]} and exits 0 only when the
file holds at least one primary key and each one is pinned; with --write-binary, only then
writes the key, dearmored, to OUT (mode 0600: a keyring gpgv --keyring reads, holding
exactly the checked keys; the efa role verifies AWS's installer signature with it).
Subkeys are listed, not judged: apt accepts one only with a binding signature made by its
primary key. Fingerprints as RFC 4880 section 12.2
(v4: SHA-1 over 0x99, a two-octet length and the key packet body) and RFC 9580 section 5.5.4
(v6: SHA-256 over 0x9B, a four-octet length and the body). Runs with the target's python3,
standard library only.
"""

import base64
import hashlib
import json
import os
import sys

PUBLIC_KEY, PUBLIC_SUBKEY = 6, 14


def dearmor(data):
    if b"-----BEGIN PGP PUBLIC KEY BLOCK-----" not in data:
        return data
    out = b""
    for block in data.split(b"-----BEGIN PGP PUBLIC KEY BLOCK-----")[1:]:
        body = block.split(b"-----END PGP PUBLIC KEY BLOCK-----")[0]
        lines = body.strip().splitlines()
        while lines and lines[0].strip() and b":" in lines[0]:  # armor headers
            lines.pop(0)
        text = b"".join(x.strip() for x in lines if x.strip() and not x.startswith(b"="))
        out += base64.b64decode(text, validate=True)
    return out


def packets(data):
    i = 0
    while i < len(data):
        head = data[i]
        if not head & 0x80:
            raise ValueError(f"octet {i} is not a packet header")
        if head & 0x40:  # new format
            tag, i = head & 0x3F, i + 1
            first = data[i]
            if first < 192:
                length, i = first, i + 1
            elif first < 224:
                length, i = ((first - 192) << 8) + data[i + 1] + 192, i + 2
            elif first == 255:
                length, i = int.from_bytes(data[i + 1 : i + 5], "big"), i + 5
            else:
                raise ValueError("partial body lengths do not occur in key packets")
        else:  # old format
            tag, kind, i = (head >> 2) & 0x0F, head & 0x03, i + 1
            if kind == 3:
                raise ValueError("indeterminate lengths do not occur in key packets")
            size = (1, 2, 4)[kind]
            length, i = int.from_bytes(data[i : i + size], "big"), i + size
        body = data[i : i + length]
        if len(body) != length:
            raise ValueError("truncated packet")
        yield tag, body
        i += length


def fingerprint(body):
    if body[0] == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if body[0] == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ValueError(f"key packet version {body[0]} is not supported")


def main():
    args, out = sys.argv[1:], None
    if args[:1] == ["--write-binary"]:
        out, args = args[1], args[2:]
    path, pinned = args[0], {"".join(f.split()).upper() for f in args[1:]}
    try:
        with open(path, "rb") as f:
            found = {PUBLIC_KEY: [], PUBLIC_SUBKEY: []}  # type: dict[int, list[str]]
            binary = dearmor(f.read())
            for tag, body in packets(binary):
                if tag in found:
                    found[tag].append(fingerprint(body))
    except (OSError, ValueError, IndexError) as exc:
        print(f"{path} is not an OpenPGP public key file: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"primary": found[PUBLIC_KEY], "subkeys": found[PUBLIC_SUBKEY]}))
    unknown = [fp for fp in found[PUBLIC_KEY] if fp not in pinned]
    if not found[PUBLIC_KEY] or unknown:
        print(
            f"{path} holds the key(s) {', '.join(unknown) or 'none'}, not the pinned "
            f"fingerprint(s) {', '.join(sorted(pinned)) or 'none'}: refusing to trust it "
            "(images/compat/apt_keys.yaml names the key and its source)",
            file=sys.stderr,
        )
        return 1
    if out is not None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as keyring:
            keyring.write(binary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
