"""Timeouts and retry policies of every activity call, in one place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

from skyhop.contract import ErrorType, host_queue
from skyhop.providers.base import Offering

__all__ = ["HEARTBEAT", "LONG_RETRY", "SHORT_RETRY", "USER_ERRORS", "queue_for"]

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


def queue_for(queue: str, arg: Any) -> str:
    """``queue``, or its twin on one machine when the activity's input is a cluster bound to it.

    The input names the cluster as itself (a ``ClusterHandle`` or a ``ProvisionRequest``) or as its
    ``handle``; a ``local`` cluster's offering names the machine whose folders hold it, and no other
    worker may run its activities (they would look for folders that are not there). When that
    machine's worker is down, the activity waits for it on its queue.
    """
    for holder in (arg, getattr(arg, "handle", None)):
        offering = getattr(holder, "offering", None)
        if isinstance(offering, Offering) and offering.host:
            return host_queue(queue, offering.host)
    return queue
