"""The management clients, built in one place.

- Credentials: ``DefaultAzureCredential()`` (environment, workload identity for CI,
  managed identity, Azure CLI): never a secret in a file of ours.
- Endpoint: ``https://management.azure.com`` unless ``endpoint`` /
  ``IMAGECTL_AZURE_ENDPOINT`` names another (the local ARM fake in tests). Only with an
  override that is plain http does the bearer policy allow a non-TLS URL.
- Retries: azure-core's RetryPolicy (429 and 5xx, honouring Retry-After) with
  ``retry_total`` attempts; LRO polling every ``polling_interval`` seconds.
- Deadlines (``imagectl.clouds.deadlines``): the transport's ``connection_timeout`` and
  ``read_timeout``, the RetryPolicy's ``timeout`` as the per-call total, and a per-call
  policy that turns a transport or retry timeout into ``CloudDeadline`` naming the
  endpoint.
- Models read from several threads are set up before any thread reads them
  (``warm_models``). azure-mgmt-compute's generated models build each class's field
  table the first time an object of it is made; two threads doing that at once can make
  one of them fail, and the SDK then silently keeps the raw JSON: a promotion's region
  thread read ``replication_status`` as a ``dict`` ("Thread-unsafe lazy init in
  ``Model.__new__`` causes silent deserialization corruption under concurrency",
  Azure/azure-sdk-for-python#47426; fixed in the generator by microsoft/typespec#11236,
  not yet in the azure-mgmt-compute we pin).
"""

from __future__ import annotations

import functools
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from imagectl.clouds.common import endpoint_from_env
from imagectl.clouds.deadlines import CloudDeadline, Deadlines, deadlines, is_timeout

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken, TokenCredential
    from azure.core.pipeline import PipelineRequest, PipelineResponse
    from azure.core.pipeline.policies import HTTPPolicy
    from azure.core.pipeline.transport import HttpRequest, HttpResponse
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy
    from azure.mgmt.network import NetworkManagementClient

ENV_ENDPOINT = "IMAGECTL_AZURE_ENDPOINT"
ARM = "https://management.azure.com"
SCOPE = "https://management.azure.com/.default"


class LocalToken:
    """A token credential for a local ARM endpoint: a fixed, meaningless token."""

    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:

        from azure.core.credentials import AccessToken

        return AccessToken("local-endpoint-token", int(time.time()) + 3600)


DEADLINE_KEY = "imagectl_deadline"  # in the pipeline request's context


def _deadline(request: PipelineRequest[HttpRequest], limits: Deadlines, why: str) -> CloudDeadline:
    http = request.http_request
    url = urlsplit(http.url)
    where = f"{url.scheme}://{url.netloc}"
    return CloudDeadline("Azure", f"{http.method} {url.path}", where, limits, why)


def _deadline_policies(
    limits: Deadlines,
) -> tuple[HTTPPolicy[HttpRequest, HttpResponse], HTTPPolicy[HttpRequest, HttpResponse]]:
    """(per call, per retry): the call's deadline set once and the last attempt's timeout
    named; no attempt started that could not end before the deadline."""
    from azure.core.pipeline.policies import HTTPPolicy
    from azure.core.pipeline.transport import HttpRequest, HttpResponse

    class CallDeadline(HTTPPolicy[HttpRequest, HttpResponse]):
        def send(
            self, request: PipelineRequest[HttpRequest]
        ) -> PipelineResponse[HttpRequest, HttpResponse]:
            request.context[DEADLINE_KEY] = limits.start()
            try:
                return self.next.send(request)
            except Exception as exc:
                if not is_timeout(exc):
                    raise
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise _deadline(request, limits, why) from exc

    class AttemptDeadline(HTTPPolicy[HttpRequest, HttpResponse]):
        def send(
            self, request: PipelineRequest[HttpRequest]
        ) -> PipelineResponse[HttpRequest, HttpResponse]:
            ends_at = request.context.get(DEADLINE_KEY)
            attempt = request.context.setdefault("imagectl_attempt", 0) + 1
            request.context["imagectl_attempt"] = attempt
            if attempt > 1 and ends_at is not None and not limits.room_for_attempt(ends_at):
                raise _deadline(request, limits, f"{attempt - 1} attempt(s) timed out")
            return self.next.send(request)

    return CallDeadline(), AttemptDeadline()


def _local_auth_policy(credential: TokenCredential) -> ARMChallengeAuthenticationPolicy:
    from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy

    class LocalHttpAuth(ARMChallengeAuthenticationPolicy):
        """Bearer auth that allows http: used only for an explicit local endpoint."""

        def on_request(self, request: PipelineRequest[HttpRequest]) -> None:
            request.context.options["enforce_https"] = False
            super().on_request(request)

    return LocalHttpAuth(credential, SCOPE)


# The gallery models a promotion's region threads (and azure-core's LRO poller threads)
# deserialize at the same time: every model class reachable from these.
THREADED_MODELS = ("GalleryImageVersion", "GalleryImage", "Gallery")


def _model_classes(deserializer: object, base: type) -> list[type]:
    """The model classes inside a field's deserializer (partials of partials, lists)."""
    if isinstance(deserializer, type):
        return [deserializer] if issubclass(deserializer, base) else []
    if isinstance(deserializer, functools.partial):
        parts = [deserializer.func, *deserializer.args]
    elif isinstance(deserializer, (list, tuple)):
        parts = list(deserializer)
    else:
        return []
    return [c for part in parts for c in _model_classes(part, base)]


def warm_models(names: tuple[str, ...] = THREADED_MODELS) -> set[type]:
    """Build the field table of every compute model class reachable from ``names`` (and
    their subclasses) now, on one thread, so no later thread builds one (see the module
    docstring). Returns the classes set up."""
    from azure.mgmt.compute import models
    from azure.mgmt.compute._utils.model_base import Model

    seen: set[type] = set()
    todo: list[Any] = [getattr(models, name) for name in names]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        cls.__new__(cls)  # the SDK's lazy set-up runs in __new__; no object is kept
        todo.extend(cls.__subclasses__())
        for field in cls._attr_to_rest_field.values():
            todo.extend(_model_classes(field._type, Model))
    return seen


class AzureClients:
    def __init__(
        self,
        *,
        subscription_id: str,
        endpoint: str | None = None,
        credential: TokenCredential | None = None,
        polling_interval: float = 15.0,
        retry_total: int = 8,
        retry_backoff_factor: float = 0.8,
    ) -> None:
        self.subscription_id = subscription_id
        self.endpoint = endpoint_from_env(endpoint, ENV_ENDPOINT)
        if credential is None:
            if self.endpoint:
                credential = LocalToken()
            else:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
        self.credential: TokenCredential = credential
        self.polling_interval = polling_interval
        self.retry_total = retry_total
        self.retry_backoff_factor = retry_backoff_factor
        self.deadlines = deadlines()
        self._compute: ComputeManagementClient | None = None
        self._network: NetworkManagementClient | None = None
        self._lock = threading.Lock()  # one client of each kind, whichever thread asks first

    def _kwargs(self) -> dict[str, Any]:
        per_call, per_retry = _deadline_policies(self.deadlines)
        kwargs: dict[str, Any] = {
            "base_url": self.endpoint or ARM,
            "credential_scopes": [SCOPE],
            "polling_interval": self.polling_interval,
            "retry_total": self.retry_total,
            "retry_backoff_factor": self.retry_backoff_factor,
            "connection_timeout": self.deadlines.connect_s,
            "read_timeout": self.deadlines.read_s,
            "timeout": self.deadlines.total_s,  # the RetryPolicy's, for one call
            "per_call_policies": [per_call],
            "per_retry_policies": [per_retry],
        }
        if self.endpoint and self.endpoint.startswith("http://"):
            kwargs["authentication_policy"] = _local_auth_policy(self.credential)
        return kwargs

    @property
    def compute(self) -> ComputeManagementClient:
        with self._lock:
            if self._compute is None:
                from azure.mgmt.compute import ComputeManagementClient

                warm_models()
                self._compute = ComputeManagementClient(
                    self.credential, self.subscription_id, **self._kwargs()
                )
            return self._compute

    @property
    def network(self) -> NetworkManagementClient:
        with self._lock:
            if self._network is None:
                from azure.mgmt.network import NetworkManagementClient

                self._network = NetworkManagementClient(
                    self.credential, self.subscription_id, **self._kwargs()
                )
            return self._network
