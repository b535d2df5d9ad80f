"""Faults for moto (AWS), with the same API as the GCP and Azure fakes.

moto is the AWS emulator (in process with ``mock_aws``, or ``ThreadedMotoServer`` in this
process). Faults are raised inside moto's EC2 backend as moto ``EC2ClientError``s, so moto
renders the real EC2 error XML and boto3 parses it as it would from AWS (its retry mode
included): nothing of imagectl is mocked.

    with AwsFaults() as faults:
        faults.throttle(2)                      # next 2 RunInstances: RequestLimitExceeded
        faults.capacity_error("us-east-1a")     # InsufficientInstanceCapacity there
        faults.quota_error()                    # VcpuLimitExceeded
        faults.never_running()                  # instances stay 'pending'
        faults.throttle(1, action="describe_images")

``AwsFaults.account`` is moto's default account; ``backend(region)`` is moto's EC2 backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MOTO_ACCOUNT = "123456789012"


def _error(code: str, message: str) -> Exception:
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(code, message)


class AwsFaults:
    account = MOTO_ACCOUNT

    def __init__(self) -> None:
        self._originals: dict[str, Callable[..., Any]] = {}
        self._throttles: dict[str, int] = {}
        self._capacity: dict[str, int | None] = {}
        self._quota: list[int | None] = []
        self._never_running = False
        self.calls: dict[str, int] = {}
        self.faults_raised: list[str] = []

    # -- installation ---------------------------------------------------------------------
    def __enter__(self) -> AwsFaults:
        from moto.ec2.models import EC2Backend

        for name in ("run_instances", "describe_images", "describe_instances", "create_tags"):
            original = getattr(EC2Backend, name)
            self._originals[name] = original
            setattr(EC2Backend, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc: object) -> None:
        from moto.ec2.models import EC2Backend

        for name, original in self._originals.items():
            setattr(EC2Backend, name, original)
        self._originals.clear()

    @staticmethod
    def backend(region: str) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[MOTO_ACCOUNT][region]

    # -- faults ---------------------------------------------------------------------------
    def throttle(self, times: int = 1, *, action: str = "run_instances") -> None:
        self._throttles[action] = self._throttles.get(action, 0) + times

    def capacity_error(self, zone: str, times: int | None = None) -> None:
        self._capacity[zone] = times

    def quota_error(self, times: int | None = None) -> None:
        self._quota.append(times)

    def never_running(self) -> None:
        self._never_running = True

    # -- the wrapper ----------------------------------------------------------------------
    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        faults = self

        def wrapper(backend: Any, *args: Any, **kwargs: Any) -> Any:
            faults.calls[name] = faults.calls.get(name, 0) + 1
            if faults._throttles.get(name, 0) > 0:
                faults._throttles[name] -= 1
                faults.faults_raised.append(f"{name}:RequestLimitExceeded")
                raise _error("RequestLimitExceeded", "Request limit exceeded.")
            if name == "run_instances":
                faults._admit(backend, kwargs)
                result = original(backend, *args, **kwargs)
                if faults._never_running:
                    for inst in result.instances:
                        inst._state.name = "pending"
                        inst._state.code = 0
                return result
            return original(backend, *args, **kwargs)

        return wrapper

    def _admit(self, backend: Any, kwargs: dict[str, Any]) -> None:
        zone = kwargs.get("placement") or f"{backend.region_name}a"
        left = self._capacity.get(zone, 0)
        if zone in self._capacity and left != 0:
            self._capacity[zone] = None if left is None else left - 1
            self.faults_raised.append(f"run_instances:InsufficientInstanceCapacity:{zone}")
            raise _error(
                "InsufficientInstanceCapacity",
                f"We currently do not have sufficient {kwargs.get('instance_type')} capacity in "
                f"the Availability Zone you requested ({zone}). Our system will be working on "
                "provisioning additional capacity.",
            )
        if self._quota and self._quota[0] != 0:
            left = self._quota[0]
            self._quota[0] = None if left is None else left - 1
            self.faults_raised.append("run_instances:VcpuLimitExceeded")
            raise _error(
                "VcpuLimitExceeded",
                "You have requested more vCPU capacity than your current vCPU limit of 0 allows "
                "for the instance bucket that the specified instance type belongs to.",
            )
