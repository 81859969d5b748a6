"""Activities that create and remove infrastructure (long task queue).

A provision attempt returns a classified failure instead of raising it: capacity, quota and
credential errors are ordinary outcomes the failover loop acts on, not activity failures to retry.
Only transient errors raise, so Temporal retries them in place with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from pydantic import BaseModel
from temporalio import activity

from skyhop.providers.base import ClusterHandle, ProvisionRequest
from skyhop.providers.errors import FailureScope, ProviderError, ProviderUnavailableError, TransientError
from skyhop.providers.registry import UnknownProviderError, get_provider

__all__ = ["AttemptFailure", "AttemptOutcome", "provision_attempt", "terminate"]

T = TypeVar("T")
_HEARTBEAT_EVERY_S = 2.0


class AttemptFailure(BaseModel):
    """Why one provision attempt failed, classified."""

    scope: FailureScope
    kind: str
    """capacity, quota, credentials, not supported, invalid request."""
    code: str
    """The cloud's own error code, e.g. InsufficientInstanceCapacity."""
    message: str
    leftover: bool = True
    """Whether instances may be left for compensation to remove."""


class AttemptOutcome(BaseModel):
    """Output of ``provision_attempt``: the running cluster, or why not."""

    handle: ClusterHandle | None = None
    failure: AttemptFailure | None = None


async def heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating; on cancellation let it finish first, so nothing is half-done.

    A cloud call already sent cannot be taken back: returning before it completes would let the
    workflow's compensation run while an instance is still being created, and leak it.
    """
    task = asyncio.ensure_future(work)
    while True:
        try:
            done, _ = await asyncio.wait([task], timeout=_HEARTBEAT_EVERY_S)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
            raise
        if done:
            return task.result()
        activity.heartbeat()


@activity.defn
async def provision_attempt(request: ProvisionRequest) -> AttemptOutcome:
    """Bring up the cluster in the offering's zone; idempotent, so a retry never creates a second set."""
    try:
        provider = get_provider(request.offering.provider)
    except UnknownProviderError as exc:
        # A catalog offers a cloud this installation cannot launch on: fail over to another.
        unavailable = ProviderUnavailableError(str(exc), "UnknownProvider", leftover=False)
        return AttemptOutcome(failure=_failure(unavailable))
    try:
        handle = await heartbeating(provider.launch(request))
    except TransientError:
        raise
    except ProviderError as exc:
        failure = _failure(exc)
        activity.logger.info("provision attempt at %s failed: %s", request.offering.location, failure)
        return AttemptOutcome(failure=failure)
    return AttemptOutcome(handle=handle)


def _failure(exc: ProviderError) -> AttemptFailure:
    return AttemptFailure(
        scope=exc.scope, kind=exc.kind, code=exc.code, message=exc.message, leftover=exc.leftover
    )


@activity.defn
async def terminate(handle: ClusterHandle) -> None:
    """Remove every node of the cluster in the handle's location, found by its tags."""
    await heartbeating(get_provider(handle.offering.provider).terminate(handle))
