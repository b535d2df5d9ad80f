"""ARM error codes that mean "no capacity here" or "over quota", as data."""

from __future__ import annotations

from imagectl.clouds.base import CapacityError, QuotaError

# Sources: Azure docs "Resolve errors for SKU not available", "Troubleshoot allocation
# failures", "Resolve errors for resource quotas".
CAPACITY_CODES = frozenset(
    {
        "SkuNotAvailable",
        "AllocationFailed",
        "ZonalAllocationFailed",
        "OverconstrainedAllocationRequest",
        "OverconstrainedZonalAllocationRequest",
    }
)
QUOTA_CODES = frozenset({"QuotaExceeded", "OperationNotAllowed"})


def error_code(exc: BaseException) -> str:
    error = getattr(exc, "error", None)
    return str(getattr(error, "code", "") or "")


def is_not_found(exc: BaseException) -> bool:
    return getattr(exc, "status_code", None) == 404


def translate_launch_error(exc: BaseException, location: str) -> BaseException:
    code = error_code(exc)
    message = str(getattr(getattr(exc, "error", None), "message", "") or exc)
    if code in CAPACITY_CODES:
        return CapacityError(location, f"{code}: {message}")
    if code == "QuotaExceeded" or (code == "OperationNotAllowed" and "quota" in message.lower()):
        return QuotaError(f"{location}: {code}: {message}")
    return exc
