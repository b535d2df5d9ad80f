"""Every cloud call has a deadline: a connect timeout and a read timeout on every SDK
client, and a total per call (its retries included), after which the call fails with one
``CloudDeadline`` naming the endpoint (exit 2), instead of minutes of retries against an
endpoint that accepts connections and never answers.

Settings (seconds, read once per client):

- ``IMAGECTL_CLOUD_CONNECT_TIMEOUT_S`` (default 10): to open a connection;
- ``IMAGECTL_CLOUD_READ_TIMEOUT_S`` (default 60): for each read of an answer;
- ``IMAGECTL_CLOUD_CALL_DEADLINE_S`` (default 300): one call, every retry included. A
  retry that could not end before it is not started.

Each cloud's clients module applies them in its SDK's terms: botocore's ``Config``
(``connect_timeout``, ``read_timeout``) and a ``needs-retry`` hook; google-api-core's
per-call ``timeout`` and the ``Retry`` deadline; azure-core's ``connection_timeout``,
``read_timeout`` and the retry policy's ``timeout``. Long-running operations (an image
copy, an instance boot) are waited on with their own deadlines, each call of the wait
bounded by these.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from imagectl.core.errors import CloudError
from imagectl.redact import redact_url
from imagectl.settings import env_seconds

ENV_CONNECT = "IMAGECTL_CLOUD_CONNECT_TIMEOUT_S"
ENV_READ = "IMAGECTL_CLOUD_READ_TIMEOUT_S"
ENV_DEADLINE = "IMAGECTL_CLOUD_CALL_DEADLINE_S"
DEFAULT_CONNECT_S = 10.0
DEFAULT_READ_S = 60.0
DEFAULT_DEADLINE_S = 300.0


@dataclass(frozen=True)
class Deadlines:
    connect_s: float
    read_s: float
    total_s: float

    def start(self) -> float:
        """The monotonic time by which a call starting now must end."""
        return time.monotonic() + self.total_s

    def room_for_attempt(self, ends_at: float) -> bool:
        """Whether one more attempt (connect and read) can end before ``ends_at``."""
        return time.monotonic() + self.connect_s + self.read_s <= ends_at


def deadlines() -> Deadlines:
    """The configured timeouts (exit 2 for a value that is not a positive number)."""
    return Deadlines(
        connect_s=env_seconds(ENV_CONNECT, minimum=0.001) or DEFAULT_CONNECT_S,
        read_s=env_seconds(ENV_READ, minimum=0.001) or DEFAULT_READ_S,
        total_s=env_seconds(ENV_DEADLINE, minimum=0.001) or DEFAULT_DEADLINE_S,
    )


class CloudDeadline(CloudError):
    """A cloud call got no answer within its deadline (exit 2)."""

    def __init__(self, cloud: str, operation: str, endpoint: str, limits: Deadlines, why: str):
        self.endpoint = redact_url(endpoint)
        super().__init__(
            f"{cloud} call {operation} to {self.endpoint} got no answer within its deadline "
            f"({why}; connect timeout {limits.connect_s:g} s, read timeout "
            f"{limits.read_s:g} s, {limits.total_s:g} s per call with retries)",
            hint=f"Check the network and the endpoint (IMAGECTL_AWS_ENDPOINT_URL / "
            f"IMAGECTL_GCP_ENDPOINT / IMAGECTL_AZURE_ENDPOINT when one is set); "
            f"{ENV_DEADLINE}, {ENV_CONNECT} and {ENV_READ} set the limits",
        )


def is_timeout(exc: BaseException) -> bool:
    """A connect or read timeout of any SDK's transport, along the exception's causes (by
    class name, as ``imagectl.clouds.sdk_errors`` recognises exceptions: no SDK imported
    here). A refused connection is an answer, not a timeout (urllib3's
    NewConnectionError derives from its ConnectTimeoutError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {k.__name__ for k in type(current).__mro__}
        if "NewConnectionError" in names or isinstance(current, ConnectionRefusedError):
            return False
        if isinstance(current, TimeoutError) or any("Timeout" in n for n in names):
            return True
        current = current.__cause__ or current.__context__
    return False
