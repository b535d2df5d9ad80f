"""EC2 error codes that mean "no capacity here" or "over quota", as data."""

from __future__ import annotations

from typing import Any

from imagectl.clouds.base import CapacityError, QuotaError

# Source: EC2 API reference, "Error codes for the Amazon EC2 API".
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacity",
        "ReservationCapacityExceeded",  # the capacity reservation has no instance left
        "Unsupported",  # the instance type is not offered in this Availability Zone
    }
)
QUOTA_CODES = frozenset(
    {
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "InsufficientAddressCapacity",
        "AddressLimitExceeded",
    }
)


def error_code(exc: BaseException) -> str:
    response: Any = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def translate_launch_error(exc: BaseException, location: str) -> BaseException:
    """The CapacityError / QuotaError a run_instances failure stands for, else ``exc``."""
    code = error_code(exc)
    message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", exc))
    if code in CAPACITY_CODES:
        return CapacityError(location, f"{code}: {message}")
    if code in QUOTA_CODES:
        return QuotaError(f"{location}: {code}: {message}")
    return exc
