"""boto3 sessions and clients, built in one place.

Credentials come only from boto3's default chain (environment, web identity for CI,
SSO / shared config, instance or container role): nothing is read from a file of ours
and nothing secret is logged. Throttling and transient errors are retried by botocore's
own retry modes (``adaptive`` by default: client-side rate limiting plus backoff).
The endpoint is the real one unless ``endpoint_url`` / ``IMAGECTL_AWS_ENDPOINT_URL`` /
``AWS_ENDPOINT_URL`` names another (moto in tests and in the README's try-it path).
"""

from __future__ import annotations

import threading
from typing import Any

from imagectl.clouds.common import endpoint_from_env

ENV_ENDPOINT = ("IMAGECTL_AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL")
DEFAULT_RETRY_MODE = "adaptive"
DEFAULT_MAX_ATTEMPTS = 8


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
        import boto3

        self.region = region
        self.endpoint_url = endpoint_from_env(endpoint_url, *ENV_ENDPOINT)
        self.session = session or boto3.session.Session(profile_name=profile)
        self.retry_mode = retry_mode
        self.max_attempts = max_attempts
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def config(self) -> Any:
        from botocore.config import Config

        return Config(
            retries={"mode": self.retry_mode, "max_attempts": self.max_attempts},
            user_agent_extra="imagectl",
        )

    def client(self, service: str, region: str | None = None) -> Any:
        key = (service, region or self.region)
        with self._lock:
            if key not in self._clients:
                kwargs: dict[str, Any] = {"region_name": key[1], "config": self.config()}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                self._clients[key] = self.session.client(service, **kwargs)
            return self._clients[key]

    def ec2(self, region: str | None = None) -> Any:
        return self.client("ec2", region)

    def ssm(self, region: str | None = None) -> Any:
        return self.client("ssm", region)
