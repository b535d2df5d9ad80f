"""Strict patterns for every string a stack file holds.

Stack strings travel into Packer variables, Ansible extra vars, apt source lines and
cloud API calls. None of them is free text: each is a version, a package name, a cloud
resource name or a URL, and its pattern allows only the characters that kind of value
has (no whitespace, no newline, no quote, no ``{``, ``}`` or ``%``: nothing a template
engine or a shell could act on). The patterns are exported into the JSON Schema.

``$`` in these patterns is the end of the text: pydantic checks them with Rust's regex
engine (no "before a final newline" rule as in Python's ``re``).

Sources:
- Debian package names and versions: Debian Policy Manual, 5.6.1 "Source" and 5.6.12
  "Version" (https://www.debian.org/doc/debian-policy/ch-controlfields.html).
- Each cloud's resource names (AMI ids, GCP labels, Azure resource groups...) are typed
  beside its stack section, with their sources (``imagectl.clouds.<name>.stack``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints


def pattern(regex: str, max_length: int = 128) -> object:
    return StringConstraints(pattern=regex, max_length=max_length)


# Debian Policy 5.6.1: lowercase letters, digits, + - . ; at least two characters,
# starting with an alphanumeric character.
DebName = Annotated[str, pattern(r"^[a-z0-9][a-z0-9+.-]+$", 100)]
# Debian Policy 5.6.12: [epoch:]upstream[-revision]; upstream starts with a digit and
# holds alphanumerics and . + ~ - (here without the colon an epoch would permit).
DebVersion = Annotated[str, pattern(r"^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$", 100)]
# Release numbers as NVIDIA, DOCA and EFA publish them: 580.95.05, 3.1.0, 24.10-1.1.4.0
Version = Annotated[str, pattern(r"^[0-9]+(\.[0-9]+)+(-[0-9]+(\.[0-9]+)*)?$", 40)]
# An exact kernel release as `uname -r` prints it: 6.8.0-1021-aws (no wildcard, no range).
KernelRelease = Annotated[str, pattern(r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+(-[a-z0-9]+)*$", 64)]
# Cloud resource names.
Region = Annotated[str, pattern(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", 63)]
ShapeName = Annotated[str, pattern(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$", 80)]
GpuSku = Annotated[str, pattern(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", 64)]
# a Linux login name (useradd's NAME_REGEX default): a base image's default user
LinuxUser = Annotated[str, pattern(r"^[a-z_][a-z0-9_-]{0,31}$", 32)]
# GCP IAM members (user:, group:, serviceAccount:, domain:) or an Azure object id.
Principal = Annotated[
    str,
    pattern(
        r"^(([a-zA-Z]+:[A-Za-z0-9._%+@-]+)|([0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}))$",
        200,
    ),
]
# An apt mirror: an http(s) URL (host, optional port, a path of RFC 3986 2.3 unreserved
# characters) or a local file: URI (sources.list(5) "file" type).
MirrorUrl = Annotated[
    str,
    pattern(
        r"^(https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/+-]*)?"
        r"|file:///[A-Za-z0-9._~/+-]*)$",
        300,
    ),
]
# Free text meant for people (a stack's description): one line, no template characters.
Description = Annotated[str, pattern(r"^[^\x00-\x1f\x7f{}%]*$", 300)]
