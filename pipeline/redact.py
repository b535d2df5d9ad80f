"""URLs that can carry credentials, redacted for every message and log line.

A URL can hold a secret in three places, all hidden here:

- its user information: ``user:PASSWORD@`` shows ``user:***@``; on http(s) a user name
  alone may be a token (pip's and git's ``https://TOKEN@host/...`` form) and shows
  ``***@``, while a database URL's lone user name is a role (``postgresql://imagectl@db``)
  and stays;
- its query and fragment parameters whose name says secret: ``?password=``,
  ``?sslpassword=``, ``?token=``, ``access_token``, ``X-Amz-Signature``, ``sig``,
  ``client_secret``, ``sslkey``... show ``?password=***``.

``redact_url`` parses leniently (a URL that does not parse is still redacted: everything
before the last ``@`` is user information when the authority holds an ``@`` or a ``:``
comes before the first one; an ``@`` in a path alone is not); ``scrub`` removes a URL's
secrets wherever a tool's own message repeats them (a driver's or pip's error text).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
MIN_SECRET = 4  # shorter values are not searched for in messages (they would mangle them)
# Parameter names that hold secrets: libpq's password, sslpassword and sslkey, tokens,
# keys and signatures (S3 and Azure SAS pre-signed URLs), OAuth's client secret.
SECRET_NAME = re.compile(
    r"pass|pwd|secret|token|key|sig|credential|auth|session|cookie|private", re.IGNORECASE
)
_PARAM = re.compile(r"([^&;=#]*)=([^&;#]*)")


def _split(raw: str) -> tuple[str, str, str, str]:
    """(scheme + '://', userinfo or '', host and path, '?query#fragment' or '')."""
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "", raw
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    before, params = rest[:cut], rest[cut:]
    authority = before.split("/", 1)[0]
    if ("@" not in authority and ":" not in before.split("@", 1)[0]) or "@" not in before:
        return f"{scheme}{sep}", "", before, params  # no user information (a path's '@')
    # the last '@' ends the user information: a password may hold '@' or '/' unescaped
    userinfo, _, hostpath = before.rpartition("@")
    return f"{scheme}{sep}", userinfo, hostpath, params


def _token_user(prefix: str) -> bool:
    """Whether a lone user name may be a token: on http(s) (pip, git), not a database."""
    return prefix.lower() in ("http://", "https://")


def _params(params: str) -> str:
    return _PARAM.sub(
        lambda m: f"{m.group(1)}={MASK}" if SECRET_NAME.search(m.group(1)) else m.group(0), params
    )


def redact_url(raw: str) -> str:
    """``raw`` with its password, a lone user name and secret parameters as ``***``."""
    prefix, userinfo, hostpath, params = _split(str(raw))
    if userinfo:
        user, colon, _password = userinfo.partition(":")
        if colon and user:
            userinfo = f"{user}:{MASK}@"
        else:
            userinfo = f"{MASK}@" if colon or _token_user(prefix) else f"{userinfo}@"
    shown = f"{prefix}{userinfo}{hostpath}{_params(params)}"
    return shown if len(shown) <= 300 else shown[:297] + "..."


def secrets_of(raw: str) -> list[str]:
    """The secret values in ``raw`` (as written and percent-decoded), longest first."""
    prefix, userinfo, _, params = _split(str(raw))
    found = []
    if userinfo:
        user, colon, password = userinfo.partition(":")
        if colon and user:
            found.append(password)
        elif colon or _token_user(prefix):
            found.append(userinfo)
    found += [m.group(2) for m in _PARAM.finditer(params) if SECRET_NAME.search(m.group(1))]
    values = {v for s in found if s for v in (s, unquote(s)) if len(v) >= MIN_SECRET}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, *urls: str) -> str:
    """``text`` with every secret of ``urls`` replaced by ``***``, and any URL in it that
    carries credentials redacted."""
    for url in urls:
        for secret in secrets_of(url):
            text = text.replace(secret, MASK)
    return re.sub(r"[a-zA-Z][\w+.-]*://[^\s'\"<>]+", lambda m: redact_url(m.group(0)), text)
