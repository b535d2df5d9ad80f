"""boto3 sessions and clients, built in one place.

Credentials come only from boto3's default chain (environment, web identity for CI,
SSO / shared config, instance or container role): nothing is read from a file of ours
and nothing secret is logged. Throttling and transient errors are retried by botocore's
own retry modes (``adaptive`` by default: client-side rate limiting plus backoff).
Every call has a deadline (``imagectl.clouds.deadlines``): connect and read timeouts in
the client's ``Config``, and a ``needs-retry`` hook that starts no retry which could not
end before the call's deadline, failing with ``CloudDeadline`` naming the endpoint.
The endpoint is the real one unless ``endpoint_url`` / ``IMAGECTL_AWS_ENDPOINT_URL`` /
``AWS_ENDPOINT_URL`` names another (moto in tests and in the docs' try-it path, docs/sandbox.md).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from imagectl.clouds.common import endpoint_from_env
from imagectl.clouds.deadlines import CloudDeadline, Deadlines, deadlines, is_timeout

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

ENV_ENDPOINT = ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL")
DEFAULT_RETRY_MODE = "adaptive"
DEFAULT_MAX_ATTEMPTS = 8
DEADLINE_KEY = "imagectl_deadline"  # in botocore's request context

# botocore parses a service's JSON model once per session (its data loader caches it):
# EC2's is megabytes, 0.1-0.3 s of CPU per new session. Every session of this process
# shares one loader, so each model is parsed once per process however many providers
# (regions, stages, commands run in one process) make their own session.
_LOADER_LOCK = threading.Lock()
_loader: Any = None


def new_session(profile: str | None = None) -> Any:
    """A boto3 session (the default credential chain, ``profile`` if named) sharing this
    process's botocore data loader."""
    import boto3
    import botocore.session
    from botocore.loaders import create_loader

    global _loader
    with _LOADER_LOCK:
        if _loader is None:
            _loader = create_loader()
        core = botocore.session.get_session()
        core.register_component("data_loader", _loader)
        session = boto3.session.Session(botocore_session=core, profile_name=profile)
        # boto3 appends its own data folder to the loader's search path per session
        paths = _loader.search_paths
        paths[:] = list(dict.fromkeys(paths))
    return session


class AwsClients:
    """One boto3 session; one client per (service, region), created on first use."""

    def __init__(
        self,
        *,
        region: str,
        endpoint_url: str | None = None,
        session: Any = None,
        retry_mode: str = DEFAULT_RETRY_MODE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        profile: str | None = None,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_from_env(endpoint_url, *ENV_ENDPOINT)
        self.session = session or new_session(profile)
        self.retry_mode = retry_mode
        self.max_attempts = max_attempts
        self.deadlines: Deadlines = deadlines()
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def config(self) -> Any:
        from botocore.config import Config

        return Config(
            connect_timeout=self.deadlines.connect_s,
            read_timeout=self.deadlines.read_s,
            retries={"mode": self.retry_mode, "max_attempts": self.max_attempts},
            user_agent_extra="imagectl",
        )

    def _start_call(self, context: dict[str, object], **_: Any) -> None:
        """``before-call``: the call's deadline, kept in its request context."""
        context[DEADLINE_KEY] = self.deadlines.start()

    def _check_deadline(
        self,
        request_dict: dict[str, object],
        caught_exception: BaseException | None,
        attempts: int,
        endpoint: Any,
        operation: Any,
        **_: Any,
    ) -> None:
        """``needs-retry``: after a connection failure or timeout, fail with the endpoint
        named when no further attempt could end before the deadline (or none is left)."""
        if caught_exception is None:
            return
        context = request_dict.get("context")
        ends_at = context.get(DEADLINE_KEY) if isinstance(context, dict) else None
        out_of_time = ends_at is not None and not self.deadlines.room_for_attempt(ends_at)
        if out_of_time or (attempts >= self.max_attempts and is_timeout(caught_exception)):
            raise CloudDeadline(
                "AWS", f"{operation.service_model.service_id} {operation.name}",
                str(getattr(endpoint, "host", "?")), self.deadlines,
                f"{attempts} attempt(s): {caught_exception}",
            ) from caught_exception  # fmt: skip

    def client(self, service: str, region: str | None = None) -> Any:
        key = (service, region or self.region)
        with self._lock:
            if key not in self._clients:
                kwargs: dict[str, object] = {"region_name": key[1], "config": self.config()}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                client = self.session.client(service, **kwargs)
                client.meta.events.register("before-call", self._start_call)
                client.meta.events.register_first("needs-retry", self._check_deadline)
                self._clients[key] = client
            return self._clients[key]

    def ec2(self, region: str | None = None) -> EC2Client:
        client: EC2Client = self.client("ec2", region)
        return client

    def ssm(self, region: str | None = None) -> Any:
        return self.client("ssm", region)
