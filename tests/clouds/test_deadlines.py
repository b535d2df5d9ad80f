"""Every cloud call has a deadline.

The endpoint is a local server that accepts every connection and never answers (what a
black-holed proxy or a hung API front end does). Each cloud's real SDK client, built by
imagectl's clients module with the limits set through the same environment variables
production reads (1 s to connect, 1 s per read, 2 s per call), must fail with one
``CloudDeadline`` naming the endpoint: before, AWS retried 8 times with adaptive backoff
and no read timeout (minutes per call), and Azure's and Google's transports waited 300 s
or more for a read.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from imagectl.clouds.deadlines import CloudDeadline

LIMITS = {
    "IMAGECTL_CLOUD_CONNECT_TIMEOUT_S": "1",
    "IMAGECTL_CLOUD_READ_TIMEOUT_S": "1",
    "IMAGECTL_CLOUD_CALL_DEADLINE_S": "2",
}
# The deadline (no attempt starts that could not end before it), plus scheduling on a
# busy machine.
BOUND_S = 2 + 1.5


@pytest.fixture
def silent() -> Iterator[str]:
    """``http://127.0.0.1:PORT``: accepts connections, reads nothing, answers nothing."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in LIMITS.items():
        monkeypatch.setenv(key, value)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)


def _aws(endpoint: str) -> Callable[[], Any]:
    from imagectl.clouds.aws.clients import AwsClients

    ec2 = AwsClients(region="us-east-1", endpoint_url=endpoint).ec2()
    return lambda: ec2.describe_images(Owners=["self"])


def _gcp(endpoint: str) -> Callable[[], Any]:
    from imagectl.clouds.gcp.clients import GcpClients

    images = GcpClients(project="imagectl-test", endpoint=endpoint).images  # built (imports)
    return lambda: images.get(project="imagectl-test", image="img-1")


def _azure(endpoint: str) -> Callable[[], Any]:
    from imagectl.clouds.azure.clients import AzureClients

    compute = AzureClients(subscription_id="00000000-0000-0000-0000-000000000000",
                           endpoint=endpoint).compute  # fmt: skip
    return lambda: compute.images.get("imagectl-rg", "img-1")


CALLS = {"aws": _aws, "gcp": _gcp, "azure": _azure}


@pytest.mark.parametrize("cloud", sorted(CALLS))
def test_a_call_to_an_endpoint_that_never_answers_fails_within_its_deadline(
    cloud: str, silent: str, limits: None
) -> None:
    call = CALLS[cloud](silent)
    started = time.monotonic()
    with pytest.raises(CloudDeadline) as err:
        call()
    elapsed = time.monotonic() - started
    message = err.value.render()
    assert elapsed < BOUND_S, (elapsed, message)
    assert silent.removeprefix("http://") in message, message  # the endpoint, named
    assert "got no answer within its deadline" in message
    assert "IMAGECTL_CLOUD_CALL_DEADLINE_S" in message
    assert err.value.exit_code == 2


def test_a_deadline_that_is_not_a_number_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from imagectl.clouds.deadlines import deadlines
    from imagectl.core.errors import UserError

    monkeypatch.setenv("IMAGECTL_CLOUD_CALL_DEADLINE_S", "soon")
    with pytest.raises(UserError, match="IMAGECTL_CLOUD_CALL_DEADLINE_S"):
        deadlines()
