"""Timeouts and retry policies of every activity call, in one place."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from skyhop.contract import ErrorType

__all__ = ["HEARTBEAT", "LONG_RETRY", "SHORT_RETRY", "USER_ERRORS"]

USER_ERRORS = ErrorType.user_errors()
"""Error types that are the user's to fix (a cloud's missing credentials too): retrying them cannot help."""

HEARTBEAT = timedelta(seconds=10)
"""A long activity that has not heartbeated for this long is retried on another worker."""

SHORT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=10,
    non_retryable_error_types=USER_ERRORS,
)
LONG_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=USER_ERRORS,
)
