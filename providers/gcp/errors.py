"""Compute Engine errors -> skyhop's classified errors, scoped as SkyPilot's GCP handler scopes them.

GCP reports a failure in one of two places: the HTTP error of the call itself (``{"error": {"code":
403, "errors": [{"reason": "quotaExceeded"}]}}``), or, for an accepted insert, the ``error`` of the
zone operation once it is done (``{"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED"}]}``, with
``httpErrorStatusCode`` 503). Both carry a code string, which decides the scope: pool exhaustion
blocks the zone, regional quotas the region, the global GPU quota and permission errors the whole
provider. Codes no rule knows block the zone tried, SkyPilot's default for GCP.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skyhop.providers.error_table import HTTP_STATUSES, ErrorTable
from skyhop.providers.errors import (
    CapacityError,
    CredentialsError,
    InvalidRequestError,
    ProviderError,
    ProviderUnavailableError,
    QuotaError,
    TransientError,
)

__all__ = ["classify", "classify_operation"]

_CODES: dict[str, type[ProviderError]] = {
    "ZONE_RESOURCE_POOL_EXHAUSTED": CapacityError,
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": CapacityError,
    "insufficientCapacity": CapacityError,
    "UNSUPPORTED_OPERATION": CapacityError,
    "RESOURCE_NOT_READY": CapacityError,
    "RESOURCE_OPERATION_RATE_EXCEEDED": CapacityError,
    "RESOURCE_NOT_FOUND": CapacityError,
    "QUOTA_EXCEEDED": QuotaError,
    "quotaExceeded": QuotaError,
    "SUBNET_NOT_FOUND_FOR_VPC": QuotaError,
    "VPC_NOT_FOUND": ProviderUnavailableError,
    "accessNotConfigured": CredentialsError,
    "SERVICE_DISABLED": CredentialsError,
    "IAM_PERMISSION_DENIED": CredentialsError,
    "forbidden": CredentialsError,
    "authError": CredentialsError,
    "invalid": InvalidRequestError,
    "invalidParameter": InvalidRequestError,
    "badRequest": InvalidRequestError,
    "required": InvalidRequestError,
    "rateLimitExceeded": TransientError,
    "userRateLimitExceeded": TransientError,
    "backendError": TransientError,
    "internalError": TransientError,
}
_TABLE = ErrorTable(_CODES, HTTP_STATUSES)
_GLOBAL_GPU_QUOTA = "GPUS_ALL_REGIONS"


def _classified(code: str, message: str, status: int | None) -> ProviderError:
    if code in ("QUOTA_EXCEEDED", "quotaExceeded") and _GLOBAL_GPU_QUOTA in message:
        # A global quota: every region of the provider fails the same way.
        return ProviderUnavailableError(message, code)
    if status == 401:
        return CredentialsError(message, code or "HTTP401")
    return _TABLE.error(code, message, status)


def classify_operation(errors: Iterable[Any], status: int | None) -> ProviderError:
    """The classified form of a done operation's ``error.errors`` (``code``/``message`` entries)."""
    first = next(iter(errors), None)
    if first is None:
        return _classified("", f"operation failed with HTTP status {status}", status)
    return _classified(str(first.code), str(first.message), status)


def classify(exc: BaseException) -> ProviderError | None:
    """The classified form of a google-api-core or google-auth error, or None when ``exc`` is neither."""
    import requests
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if isinstance(exc, api.GoogleAPICallError):
        reasons = [str(e.get("reason", "")) for e in exc.errors if isinstance(e, dict)]
        reason = next((r for r in reasons if r in _CODES), None) or exc.reason or (reasons or [""])[0]
        status = exc.code if isinstance(exc.code, int) else None
        return _classified(reason, exc.message, status)
    if isinstance(exc, auth.DefaultCredentialsError | auth.RefreshError):
        # Its first sentence says what is wrong; the rest points at docs the setup hint covers.
        return CredentialsError(str(exc).split(". ")[0], type(exc).__name__)
    if isinstance(exc, auth.TransportError | requests.ConnectionError | requests.Timeout | api.RetryError):
        return TransientError(str(exc), type(exc).__name__)
    return None
