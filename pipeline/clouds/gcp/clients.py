"""The one place ``compute_v1`` clients are built, and operations are waited on.

- Credentials: ``google.auth.default()`` (ADC: workload identity, metadata server,
  ``gcloud auth application-default``); ``AnonymousCredentials`` only when an endpoint
  override (``endpoint`` option / ``IMAGECTL_GCP_ENDPOINT``) points at a local server.
- Transport: REST. Retries: ``google.api_core.retry.Retry`` on 429 / rateLimitExceeded,
  500, 502, 503 and 504 with exponential backoff, passed on every call.
- Deadlines (``imagectl.clouds.deadlines``): every call of every client carries the read
  timeout as its ``timeout`` (requests' connect and read timeout) and the Retry's
  deadline is the per-call total; a transport timeout is a ``CloudDeadline`` naming the
  endpoint. The clients are wrapped once, here (``_Bounded``), so no call site can
  forget it.
- Operations are waited on here with ``GlobalOperationsClient`` /
  ``ZoneOperationsClient`` built with the same options: the extended-operation poller
  behind ``.result()`` builds its own client and would drop the endpoint override.
  A failed operation becomes CapacityError / QuotaError / a ``google.api_core``
  exception of the operation's HTTP status.
"""

from __future__ import annotations

import time
from typing import Any

from imagectl.clouds.base import CapacityError, QuotaError
from imagectl.clouds.common import endpoint_from_env
from imagectl.clouds.deadlines import CloudDeadline, Deadlines, deadlines, is_timeout
from imagectl.clouds.gcp import compute_sdk

ENV_ENDPOINT = "IMAGECTL_GCP_ENDPOINT"
# Operation error codes (Compute Engine "Troubleshooting resource availability").
CAPACITY_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "UNSUPPORTED_OPERATION",  # the machine type is not offered in this zone
    }
)
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED"})


def _transient(exc: BaseException) -> bool:
    from google.api_core import exceptions as gexc

    if isinstance(
        exc,
        gexc.TooManyRequests
        | gexc.InternalServerError
        | gexc.BadGateway
        | gexc.ServiceUnavailable
        | gexc.GatewayTimeout,
    ):
        return True
    if isinstance(exc, gexc.Forbidden):  # Compute sometimes throttles with 403
        return "rateLimitExceeded" in str(exc) or "userRateLimitExceeded" in str(exc)
    return False


class GcpClients:
    def __init__(
        self,
        *,
        project: str,
        endpoint: str | None = None,
        credentials: Any = None,
        retry_initial_s: float = 1.0,
        retry_deadline_s: float | None = None,  # None: the per-call deadline
        poll_interval_s: float = 2.0,
        op_timeout_s: float = 1800.0,
    ) -> None:
        from google.api_core.retry import Retry

        self.project = project
        self.endpoint = endpoint_from_env(endpoint, ENV_ENDPOINT)
        if credentials is None and self.endpoint:
            from google.auth.credentials import AnonymousCredentials

            credentials = AnonymousCredentials()
        self.credentials = credentials  # None: the client library runs google.auth.default()
        self.poll_interval_s = poll_interval_s
        self.op_timeout_s = op_timeout_s
        self.deadlines = deadlines()
        if retry_deadline_s is None:
            retry_deadline_s = self.deadlines.total_s
        self.retry = Retry(
            predicate=_transient,
            initial=retry_initial_s,
            maximum=max(retry_initial_s * 32, retry_initial_s),
            multiplier=2.0,
            timeout=retry_deadline_s,
        )
        self._clients: dict[str, object] = {}

    def _make(self, name: str) -> Any:
        if name not in self._clients:
            compute_v1 = compute_sdk.compute_v1()

            kwargs: dict[str, object] = {"transport": "rest"}
            if self.credentials is not None:
                kwargs["credentials"] = self.credentials
            if self.endpoint:
                kwargs["client_options"] = {"api_endpoint": self.endpoint}
            client = getattr(compute_v1, name)(**kwargs)
            endpoint = self.endpoint or "https://compute.googleapis.com"
            self._clients[name] = _Bounded(client, name, endpoint, self.deadlines, self.retry)
        return self._clients[name]

    @property
    def images(self) -> Any:
        return self._make("ImagesClient")

    @property
    def instances(self) -> Any:
        return self._make("InstancesClient")

    @property
    def firewalls(self) -> Any:
        return self._make("FirewallsClient")

    @property
    def disks(self) -> Any:
        return self._make("DisksClient")

    @property
    def regions(self) -> Any:
        return self._make("RegionsClient")

    @property
    def reservations(self) -> Any:
        return self._make("ReservationsClient")

    @property
    def zones(self) -> Any:
        return self._make("ZonesClient")

    @property
    def resource_policies(self) -> Any:
        return self._make("ResourcePoliciesClient")

    def wait(
        self,
        operation: Any,
        *,
        zone: str | None = None,
        region: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Poll the operation (zonal, regional or global) until DONE; raise what its
        error stands for."""
        compute_v1 = compute_sdk.compute_v1()

        timeout_s = self.op_timeout_s if timeout_s is None else timeout_s
        name = operation.name
        kind = "Zone" if zone else "Region" if region else "Global"
        ops = self._make(f"{kind}OperationsClient")
        deadline = time.monotonic() + timeout_s
        while True:
            kwargs: dict[str, object] = {"project": self.project, "operation": name}
            if zone:
                kwargs["zone"] = zone
            elif region:
                kwargs["region"] = region
            op = ops.get(**kwargs, retry=self.retry)
            if op.status == compute_v1.Operation.Status.DONE:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"operation {name} not done after {timeout_s:.0f} s")
            time.sleep(self.poll_interval_s)
        raise_for_operation(op, location=zone or region or "global")
        return op

    def operation_error(self, name: str, *, zone: str | None = None) -> str | None:
        """The error of a finished operation (``None`` while it runs or when it
        succeeded): an asynchronous insert's failure is only in its operation."""
        compute_v1 = compute_sdk.compute_v1()

        ops = self._make("ZoneOperationsClient" if zone else "GlobalOperationsClient")
        kwargs: dict[str, object] = {"project": self.project, "operation": name}
        if zone:
            kwargs["zone"] = zone
        op = ops.get(**kwargs, retry=self.retry)
        if op.status != compute_v1.Operation.Status.DONE:
            return None
        errors = list(op.error.errors) if op.error and op.error.errors else []
        return "; ".join(f"{e.code}: {e.message}" for e in errors) or None


class _Bounded:
    """A ``compute_v1`` client whose every method call carries the read timeout and the
    Retry (unless the caller passes its own), and fails with ``CloudDeadline`` naming the
    endpoint when the transport times out."""

    def __init__(self, client: Any, name: str, endpoint: str, limits: Deadlines, retry: Any):
        self._client, self._name, self._endpoint = client, name, endpoint
        self._limits, self._retry = limits, retry

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._client, attr)
        if attr.startswith("_") or not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", self._limits.read_s)
            kwargs.setdefault("retry", self._retry)
            try:
                return target(*args, **kwargs)
            except Exception as exc:
                if not is_timeout(exc):
                    raise
                raise CloudDeadline(
                    "Google Cloud", f"{self._name}.{attr}", self._endpoint, self._limits,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                ) from exc  # fmt: skip

        return call


def raise_for_operation(op: Any, *, location: str) -> None:
    errors = list(op.error.errors) if op.error and op.error.errors else []
    if not errors:
        return
    from google.api_core import exceptions as gexc

    codes = [e.code for e in errors]
    message = "; ".join(f"{e.code}: {e.message}" for e in errors)
    # The call answered 200; only the finished operation says it failed: name what.
    target = str(op.target_link or "").split("/projects/", 1)[-1] or "(no target)"
    message = f"Compute operation {op.operation_type or op.name} on {target} failed: {message}"
    if any(c in CAPACITY_CODES for c in codes):
        raise CapacityError(location, message)
    if any(c in QUOTA_CODES for c in codes):
        raise QuotaError(f"{location}: {message}")
    raise gexc.from_http_status(op.http_error_status_code or 500, message)
