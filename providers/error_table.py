"""A cloud's error codes -> skyhop's classified errors: the lookup every cloud's classifier shares.

Each cloud keeps its own table (the codes are its own); the rule for what a table does not know is
the same everywhere: a REST cloud's HTTP status decides (429 and 5xx are transient, 401/403 are
credentials, 400 is a bad request), and anything else is unclassified, which blocks the zone tried
(SkyPilot's default), so failover moves on instead of retrying an unknown failure.
"""

from __future__ import annotations

from collections.abc import Mapping

from skyhop.providers.errors import (
    CredentialsError,
    InvalidRequestError,
    ProviderError,
    TransientError,
    UnclassifiedError,
)

__all__ = ["HTTP_STATUSES", "ErrorTable"]

HTTP_STATUSES: Mapping[int, type[ProviderError]] = {
    400: InvalidRequestError,
    401: CredentialsError,
    403: CredentialsError,
    429: TransientError,
    500: TransientError,
    502: TransientError,
    503: TransientError,
    504: TransientError,
}
"""What an HTTP status means when the error's code is not in the cloud's table."""


class ErrorTable:
    """One cloud's error codes, and for a REST cloud its HTTP statuses, each mapped to an error class."""

    def __init__(
        self,
        codes: Mapping[str, type[ProviderError]],
        statuses: Mapping[int, type[ProviderError]] | None = None,
    ) -> None:
        self.codes = codes
        self.statuses = statuses or {}

    def error(self, code: str, message: str, status: int | None = None) -> ProviderError:
        """The error class ``code`` names, else ``status``; a REST error with no code is ``HTTP<status>``."""
        kind = self.codes.get(code) or self.statuses.get(status or 0) or UnclassifiedError
        if code or not self.statuses:
            return kind(message, code)
        return kind(message, f"HTTP{status}")
