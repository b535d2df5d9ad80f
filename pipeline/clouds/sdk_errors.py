"""Cloud SDK failures the user must fix (no credentials, an endpoint that cannot be
reached, a refused call) as one ``CloudError`` paragraph: exit 2, never a traceback.

The CLI's last line of defence (``imagectl.cli.common.run_cli``) hands any exception it
does not know to ``translate``; exceptions are recognised by their class names along the
MRO (and the ``__cause__`` chain), so no SDK is imported here.

Sources for the names: botocore.exceptions (NoCredentialsError, PartialCredentialsError,
NoRegionError, EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError,
ClientError); google.auth.exceptions (DefaultCredentialsError, RefreshError,
TransportError); google.api_core.exceptions (GoogleAPICallError); azure.core.exceptions
(ClientAuthenticationError, ServiceRequestError, ServiceResponseError, HttpResponseError);
azure.identity (CredentialUnavailableError); requests.exceptions (ConnectionError).
"""

from __future__ import annotations

import re

from imagectl.core.errors import CloudError

CREDENTIALS = {
    "botocore.exceptions.NoCredentialsError": ("AWS", "AWS_PROFILE or AWS_ACCESS_KEY_ID"),
    "botocore.exceptions.PartialCredentialsError": ("AWS", "AWS_PROFILE or AWS_ACCESS_KEY_ID"),
    "botocore.exceptions.NoRegionError": ("AWS", "AWS_DEFAULT_REGION"),
    "google.auth.exceptions.DefaultCredentialsError": (
        "Google Cloud",
        "GOOGLE_APPLICATION_CREDENTIALS (or run `gcloud auth application-default login`)",
    ),
    "google.auth.exceptions.RefreshError": (
        "Google Cloud",
        "GOOGLE_APPLICATION_CREDENTIALS (or run `gcloud auth application-default login`)",
    ),
    "azure.identity._exceptions.CredentialUnavailableError": (
        "Azure",
        "AZURE_CLIENT_ID/AZURE_TENANT_ID (or run `az login`)",
    ),
    "azure.core.exceptions.ClientAuthenticationError": (
        "Azure",
        "AZURE_CLIENT_ID/AZURE_TENANT_ID (or run `az login`)",
    ),
}
UNREACHABLE = (
    "botocore.exceptions.EndpointConnectionError",
    "botocore.exceptions.ConnectTimeoutError",
    "botocore.exceptions.ReadTimeoutError",
    "google.auth.exceptions.TransportError",
    "azure.core.exceptions.ServiceRequestError",
    "azure.core.exceptions.ServiceResponseError",
    "requests.exceptions.ConnectionError",
    "urllib3.exceptions.MaxRetryError",
)
REFUSED = (
    "botocore.exceptions.ClientError",
    "google.api_core.exceptions.GoogleAPICallError",
    "azure.core.exceptions.HttpResponseError",
)
ENDPOINT_HINT = (
    "Check the network, and IMAGECTL_AWS_ENDPOINT_URL / IMAGECTL_GCP_ENDPOINT / "
    "IMAGECTL_AZURE_ENDPOINT if one is set"
)


def _names(exc: BaseException) -> set[str]:
    return {f"{k.__module__}.{k.__qualname__}" for k in type(exc).__mro__}


# The permission a refusal names (ARM's "perform action 'X'" / "perform action(s) 'X'",
# AWS's "not authorized to perform: X", Compute's "Required 'X' permission"): kept when a
# long message is shortened, since it is what the user must grant.
NAMED_PERMISSION = re.compile(
    r"perform action(?:\(s\))? '([^']+)'|not authorized to perform:? ([\w:-]+)|"
    r"Required '([^']+)' permission"
)


def first_line(exc: BaseException) -> str:
    """The error's first line, at most ~300 characters, keeping any permission it names."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    if len(line) <= 300:
        return line
    short = line[:297] + "..."
    named = [next(g for g in m.groups() if g) for m in NAMED_PERMISSION.finditer(line)]
    missing = [n for n in dict.fromkeys(named) if n not in short]
    return short + (f" (permission: {', '.join(missing)})" if missing else "")


def translate(exc: BaseException) -> CloudError | None:
    """The CloudError for an SDK exception the user must act on, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = _names(current)
        for name, (cloud, setting) in CREDENTIALS.items():
            if name in names:
                return CloudError(
                    f"no usable {cloud} credentials: {first_line(current)}",
                    hint=f"Set {setting}, then run the command again; nothing was changed",
                )
        if names.intersection(UNREACHABLE):
            return CloudError(
                f"cannot reach the cloud API: {first_line(current)}", hint=ENDPOINT_HINT
            )
        if names.intersection(REFUSED):
            return CloudError(
                f"the cloud API refused the call: {first_line(current)}",
                hint="Check the account's permissions and the resource named",
            )
        current = current.__cause__ or current.__context__
    return None
