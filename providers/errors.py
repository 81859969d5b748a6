"""Cloud errors, classified by what a failover should do about them.

Every provider turns its SDK's errors into one of these, so the failover loop in
``LaunchWorkflow`` never sees a cloud-specific code, only a scope::

    ProviderError                     .code: the cloud's own error code, .scope
    ├── CapacityError                 blocks the zone (or the region where there are no zones)
    │   ├── NotOfferedHereError       the zone does not offer the instance type or option
    │   └── UnclassifiedError         an error no rule knows: blocks the zone, SkyPilot's default
    ├── QuotaError                    blocks the region
    ├── ProviderUnavailableError      blocks the whole provider
    │   ├── CredentialsError          missing, invalid or expired credentials
    │   ├── NotSupportedError         the provider cannot do what the task asks (a feature gate)
    │   └── SdkMissingError           its SDK is not installed (``pip install 'skyhop[aws]'``)
    ├── InvalidRequestError           fatal: the request itself is wrong, no failover
    └── TransientError                retried in place by Temporal, with backoff

An activity that raises one of these (a teardown, a stop) is retried by Temporal unless retrying
cannot fix it (``retry_can_fix``: credentials, a missing feature, a malformed request); those
classes' names are ``RETRY_CANNOT_FIX``, which the activity retry policies list as non-retryable,
so a cleanup without credentials fails at once instead of retrying forever.

The scoping follows SkyPilot's failover handlers where they are known: GCP's pool exhaustion
blocks a zone and its quotas block a region, Azure and AWS capacity errors block the zone tried.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CapacityError",
    "CredentialsError",
    "NotOfferedHereError",
    "FailureScope",
    "InvalidRequestError",
    "NotSupportedError",
    "ProviderError",
    "ProviderUnavailableError",
    "QuotaError",
    "RETRY_CANNOT_FIX",
    "SCALE_UP_ASKED",
    "SdkMissingError",
    "TransientError",
    "UnclassifiedError",
]


class FailureScope(StrEnum):
    """How far a failure reaches: what the failover loop blocks, or whether it stops."""

    ZONE = "zone"
    REGION = "region"
    PROVIDER = "provider"
    FATAL = "fatal"
    TRANSIENT = "transient"


class ProviderError(Exception):
    """A cloud call failed; ``code`` is the cloud's own error code (``InsufficientInstanceCapacity``)."""

    scope = FailureScope.FATAL
    kind = "error"
    """The word the CLI prints for this class of failure (``capacity``, ``quota``, ...)."""
    retry_can_fix = True
    """Whether the same call may succeed later; False: only the user can fix it (see ``RETRY_CANNOT_FIX``)."""

    def __init__(self, message: str, code: str = "", *, leftover: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or type(self).__name__
        self.leftover = leftover
        """Whether the failed attempt may have left instances behind for compensation to remove."""


class CapacityError(ProviderError):
    """The zone has no capacity for the instance type right now; another zone may."""

    scope = FailureScope.ZONE
    kind = "capacity"


class NotOfferedHereError(CapacityError):
    """This zone does not offer the instance type (or spot, or the image); another zone may."""

    kind = "not offered here"


SCALE_UP_ASKED = "ScaleUpAsked"
"""The code of a capacity error raised after the region's autoscaler was asked for nodes (a
Kubernetes context's TriggeredScaleUp) that did not come in time: they may still come there, so the
launch's later attempts ask no other region's autoscaler (``ProvisionRequest.scale_up_region``)."""


class UnclassifiedError(CapacityError):
    """A cloud error no classification rule knows; blocking the zone tried keeps failover moving."""

    kind = "error"


class QuotaError(ProviderError):
    """The account's quota in this region does not allow the request."""

    scope = FailureScope.REGION
    kind = "quota"


class ProviderUnavailableError(ProviderError):
    """Nothing can be launched on this provider for this request."""

    scope = FailureScope.PROVIDER
    kind = "unavailable"
    retry_can_fix = False


class CredentialsError(ProviderUnavailableError):
    """Credentials are missing, invalid or expired."""

    kind = "credentials"


class NotSupportedError(ProviderUnavailableError):
    """The provider lacks a feature the task needs (spot, stop, open ports, custom images...)."""

    kind = "not supported"


class SdkMissingError(ProviderUnavailableError):
    """The provider's SDK is an extra this installation lacks; nothing was called, so nothing was created."""

    kind = "not installed"

    def __init__(self, message: str, code: str = "SdkMissing", *, leftover: bool = False) -> None:
        super().__init__(message, code, leftover=leftover)


class InvalidRequestError(ProviderError):
    """The request is malformed (bad image, bad parameter): retrying elsewhere would fail the same way."""

    scope = FailureScope.FATAL
    kind = "invalid request"
    retry_can_fix = False


class TransientError(ProviderError):
    """Throttling, a timeout, a 5xx: the same call may well succeed in a moment."""

    scope = FailureScope.TRANSIENT
    kind = "transient"


def _tree(cls: type[ProviderError]) -> list[type[ProviderError]]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _tree(child))]


RETRY_CANNOT_FIX = sorted(cls.__name__ for cls in _tree(ProviderError) if not cls.retry_can_fix)
"""Names of the error classes an activity retry cannot fix (Temporal matches a failure by class name)."""
