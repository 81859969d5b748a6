"""Azure Resource Manager errors -> skyhop's classified errors, scoped as SkyPilot's Azure handler.

ARM reports ``{"error": {"code", "message"}}`` on the call itself (409 ``SkuNotAvailable``) or in
the failed long-running operation (``AllocationFailed``). SkyPilot blocks the whole provider for a
read-only subscription or an authentication error and the region for everything else; skyhop's
Azure offerings have no zone, so capacity errors (which block the zone tried) block the region too.
"""

from __future__ import annotations

from skyhop.providers.error_table import HTTP_STATUSES, ErrorTable
from skyhop.providers.errors import (
    CapacityError,
    CredentialsError,
    InvalidRequestError,
    NotOfferedHereError,
    ProviderError,
    QuotaError,
    TransientError,
    UnclassifiedError,
)

__all__ = ["classify"]

_CODES: dict[str, type[ProviderError]] = {
    "SkuNotAvailable": NotOfferedHereError,
    "AllocationFailed": CapacityError,
    "ZonalAllocationFailed": CapacityError,
    "OverconstrainedAllocationRequest": CapacityError,
    "OverconstrainedZonalAllocationRequest": CapacityError,
    "QuotaExceeded": QuotaError,
    "AuthorizationFailed": CredentialsError,
    "AuthenticationFailed": CredentialsError,
    "InvalidAuthenticationToken": CredentialsError,
    "InvalidAuthenticationTokenTenant": CredentialsError,
    "ExpiredAuthenticationToken": CredentialsError,
    "SubscriptionNotFound": CredentialsError,
    "ReadOnlyDisabledSubscription": CredentialsError,
    "MissingSubscriptionRegistration": CredentialsError,
    "InvalidParameter": InvalidRequestError,
    "InvalidRequestFormat": InvalidRequestError,
    "InvalidResourceName": InvalidRequestError,
    "BadRequest": InvalidRequestError,
    "PlatformImageNotFound": InvalidRequestError,
    "TooManyRequests": TransientError,
    "RetryableError": TransientError,
    "InternalServerError": TransientError,
    "InternalExecutionError": TransientError,
    "AnotherOperationInProgress": TransientError,
}
_TABLE = ErrorTable(_CODES, HTTP_STATUSES)


def classify(exc: BaseException) -> ProviderError | None:
    """The classified form of an azure-core error, or None when ``exc`` is not one."""
    from azure.core.exceptions import (
        AzureError,
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
    )

    if isinstance(exc, ClientAuthenticationError) and exc.response is None:
        # The credential chain found nothing: its message lists every source tried, one per line.
        return CredentialsError(exc.message.splitlines()[0], type(exc).__name__)
    if isinstance(exc, HttpResponseError):
        error = exc.error
        code = str(error.code) if error is not None and error.code else ""
        message = str(error.message) if error is not None and error.message else exc.message
        status = exc.status_code
        if code == "OperationNotAllowed" and "quota" in message.lower():
            return QuotaError(message, code)
        return _TABLE.error(code, message, status)
    if isinstance(exc, ServiceRequestError):
        return TransientError(exc.message, type(exc).__name__)
    if isinstance(exc, AzureError):
        return UnclassifiedError(exc.message, type(exc).__name__)
    return None
