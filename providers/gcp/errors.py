"""Compute Engine errors -> skyhop's classified errors, scoped as SkyPilot's GCP handler scopes them.

GCP reports a failure in one of two places: the HTTP error of the call itself (``{"error": {"code":
403, "errors": [{"reason": "quotaExceeded"}]}}``), or, for an accepted insert, the ``error`` of the
zone operation once it is done (``{"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED"}]}``, with
``httpErrorStatusCode`` 503). Both carry a code string, which decides the scope: pool exhaustion
blocks the zone, regional quotas the region, the global GPU quota and permission errors the whole
provider. Codes no rule knows block the zone tried, SkyPilot's default for GCP.

The Cloud TPU API speaks google.rpc instead: an HTTP error ``{"error": {"code": 429, "status":
"RESOURCE_EXHAUSTED", "message": ...}}``, or a done long-running operation's ``{"error": {"code": 8,
"message": "There is no more capacity in the zone ..."}}`` with the numeric code. ``classify_rpc``
reads both; as in SkyPilot, an invalid argument, exhausted resources or a failed precondition block
the zone (a zone that does not offer the slice or runtime answers them), quotas the region.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skyhop.providers.error_table import HTTP_STATUSES, ErrorTable
from skyhop.providers.errors import (
    CapacityError,
    CredentialsError,
    InvalidRequestError,
    NotOfferedHereError,
    ProviderError,
    ProviderUnavailableError,
    QuotaError,
    TransientError,
)

__all__ = ["classify", "classify_operation", "classify_rpc"]

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


_RPC_NAMES = {
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    16: "UNAUTHENTICATED",
}
"""google.rpc's numeric codes (an operation's error) by the names HTTP errors carry."""
_RPC = ErrorTable(
    {
        "INVALID_ARGUMENT": NotOfferedHereError,
        "NOT_FOUND": NotOfferedHereError,
        "RESOURCE_EXHAUSTED": CapacityError,
        "FAILED_PRECONDITION": CapacityError,
        "PERMISSION_DENIED": CredentialsError,
        "UNAUTHENTICATED": CredentialsError,
        "DEADLINE_EXCEEDED": TransientError,
        "ABORTED": TransientError,
        "INTERNAL": TransientError,
        "UNAVAILABLE": TransientError,
    },
    HTTP_STATUSES,
)
_RATE_LIMIT = ("per minute", "quota metric 'requests'", "rate limit")


def classify_rpc(code: str | int, message: str, status: int | None = None) -> ProviderError:
    """The classified form of a google.rpc error (``status`` name or numeric ``code``): a quota
    blocks the region, but a request-rate quota only asks for a moment."""
    name = _RPC_NAMES.get(code, "") if isinstance(code, int) else code
    lowered = message.lower()
    if name == "RESOURCE_EXHAUSTED" and "quota" in lowered:
        if any(mark in lowered for mark in _RATE_LIMIT):
            return TransientError(message, name)
        return QuotaError(message, name)
    return _RPC.error(name, message, status)


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
