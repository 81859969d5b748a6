"""EC2 error codes -> skyhop's classified errors.

Freshly created security groups and key pairs can be briefly invisible (eventual consistency), so
their NotFound codes are transient. Codes not listed are unclassified: they block the zone tried
(SkyPilot's default rule for AWS), so failover moves on instead of retrying an unknown failure.
"""

from __future__ import annotations

from typing import Any

from skyhop.providers.error_table import ErrorTable
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
    "InsufficientInstanceCapacity": CapacityError,
    "InsufficientHostCapacity": CapacityError,
    "InsufficientReservedInstanceCapacity": CapacityError,
    "InsufficientCapacity": CapacityError,
    "InsufficientFreeAddressesInSubnet": CapacityError,
    "SpotMaxPriceTooLow": CapacityError,
    "Unsupported": NotOfferedHereError,
    "InstanceLimitExceeded": QuotaError,
    "VcpuLimitExceeded": QuotaError,
    "MaxSpotInstanceCountExceeded": QuotaError,
    "ResourceLimitExceeded": QuotaError,
    "AddressLimitExceeded": QuotaError,
    "SecurityGroupLimitExceeded": QuotaError,
    "AuthFailure": CredentialsError,
    "UnauthorizedOperation": CredentialsError,
    "InvalidClientTokenId": CredentialsError,
    "SignatureDoesNotMatch": CredentialsError,
    "ExpiredToken": CredentialsError,
    "OptInRequired": CredentialsError,
    "Blocked": CredentialsError,
    "InvalidParameterValue": InvalidRequestError,
    "InvalidParameterCombination": InvalidRequestError,
    "InvalidParameter": InvalidRequestError,
    "MissingParameter": InvalidRequestError,
    "InvalidAMIID.Malformed": InvalidRequestError,
    "InvalidAMIID.NotFound": InvalidRequestError,
    "InvalidAMIID.Unavailable": InvalidRequestError,
    "InvalidBlockDeviceMapping": InvalidRequestError,
    "InvalidInstanceType": InvalidRequestError,
    "InvalidGroup.NotFound": TransientError,
    "InvalidKeyPair.NotFound": TransientError,
    "RequestLimitExceeded": TransientError,
    "Throttling": TransientError,
    "InternalError": TransientError,
    "InternalFailure": TransientError,
    "ServiceUnavailable": TransientError,
    "Unavailable": TransientError,
}
_TABLE = ErrorTable(_CODES)


def classify(exc: BaseException) -> ProviderError | None:
    """The classified form of a botocore error, or None when ``exc`` is not one."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    if isinstance(exc, ClientError):
        error: dict[str, Any] = exc.response.get("Error", {})
        code, message = str(error.get("Code", "Unknown")), str(error.get("Message", exc))
        return _TABLE.error(code, message)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        # botocore raises these before sending anything: the call cannot have created anything.
        return CredentialsError(str(exc), type(exc).__name__, leftover=False)
    if isinstance(exc, ConnectionError):
        return TransientError(str(exc), type(exc).__name__)
    if isinstance(exc, BotoCoreError):
        return UnclassifiedError(str(exc), type(exc).__name__)
    return None
