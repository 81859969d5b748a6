"""What a Temporal failure means to the user, decided in one place for every command."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from temporalio.api.failure.v1 import Failure
    from temporalio.client import WorkflowHandle
    from temporalio.service import RPCError

__all__ = ["Patience", "asked_again", "is_not_found", "is_stuck", "stuck_reason", "while_busy"]

T = TypeVar("T")


def is_not_found(exc: RPCError) -> bool:
    """Whether Temporal answered that the workflow does not exist or has ended (a cluster that is gone)."""
    from temporalio.service import RPCStatusCode

    return exc.status == RPCStatusCode.NOT_FOUND


def is_stuck(exc: RPCError) -> bool:
    """Whether Temporal refused an update because the workflow's last task failed (a stuck workflow).

    Such a workflow runs no code until a worker can replay it: updates are refused at once and
    queries wait for ever, so the commands treat it as broken instead of waiting.
    """
    from temporalio.service import RPCStatusCode

    return exc.status == RPCStatusCode.FAILED_PRECONDITION and "Workflow Task in failed state" in exc.message


async def stuck_reason(handle: WorkflowHandle[Any, Any]) -> str | None:
    """Why the workflow is stuck (its failing task's error), or None while its tasks do not fail.

    A task that failed and is being retried (attempt 2 and up, with a failure as the latest task
    outcome in history) is stuck: a non-determinism error or an input that cannot be decoded fails
    every attempt alike. A task that only timed out (a worker was killed) is not.
    """
    description = await handle.describe()
    if description.raw_description.pending_workflow_task.attempt < 2:
        return None
    failure: Failure | None = None
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_failed_event_attributes"):
            failure = event.workflow_task_failed_event_attributes.failure
        elif event.HasField("workflow_task_completed_event_attributes"):
            failure = None
    if failure is None:
        return None
    # The worker encrypts a failure's message (the codec); the data converter reads it back.
    message = str(await description.data_converter.decode_failure(failure))
    return message.splitlines()[0] if message else "its workflow task fails"


_BUSY_RETRY_S = 120.0
"""How long a command keeps re-sending an update the server refused for load before it gives up."""


async def while_busy(send: Callable[[], Awaitable[T]]) -> T:
    """``send()``, sent again while Temporal refuses it for load (RESOURCE_EXHAUSTED) or aborts it.

    The server takes at most a few updates in flight per workflow (10 by default): a burst of
    ``exec`` while no worker runs (one was just killed, say) exceeds it. A worker crash can also
    abort an admitted update (UNAVAILABLE, "update was aborted"), a workflow task that failed
    while it carried the update refuses it (FAILED_PRECONDITION, the next task will run it), and a
    task a restarted worker completed without running the update the server had put in it makes
    the server reject it (``UnprocessedUpdate``). Sending again is safe: each of these refusals
    means the workflow never ran the update's handler.
    """
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError, RPCStatusCode

    from skyhop.contract.failures import is_unprocessed_update

    deadline = time.monotonic() + _BUSY_RETRY_S
    delay = 0.2
    while True:
        try:
            return await send()
        except RPCError as exc:
            aborted = exc.status == RPCStatusCode.UNAVAILABLE and "update was aborted" in exc.message
            task_failed = (
                exc.status == RPCStatusCode.FAILED_PRECONDITION and "workflow task failure" in exc.message
            )
            refused = exc.status == RPCStatusCode.RESOURCE_EXHAUSTED or aborted or task_failed
            if not refused or time.monotonic() + delay > deadline:
                raise
        except WorkflowUpdateFailedError as exc:
            if not is_unprocessed_update(exc) or time.monotonic() + delay > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


_REFUSED_FOR_S = 30.0
"""How long a worker may refuse a query for arriving outside a workflow task: while a task that a
dead worker started has not timed out (10 s, the workflow task timeout), every query that brings it
is refused (``workflows.runner``); then a live worker takes the task and the next ask is answered."""


async def asked_again(query: Callable[[], Awaitable[T]]) -> T:
    """``query()``, asked again while the worker refuses it for arriving outside a workflow task.

    The worker then drops the workflow's state and rebuilds it by replay (see ``workflows.runner``),
    so a later ask is answered. A query the server refuses for load (its buffer of queries waiting
    for a workflow task is full while no worker runs) is sent again as ``while_busy`` does.
    """
    from temporalio.client import WorkflowQueryFailedError

    from skyhop.contract import QUERY_OUTSIDE_TASK

    deadline = time.monotonic() + _REFUSED_FOR_S
    while True:
        try:
            return await while_busy(query)
        except WorkflowQueryFailedError as exc:
            if QUERY_OUTSIDE_TASK not in str(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


class Patience:
    """Calls sent again while the client gives up waiting for their answers, saying ``waiting``
    once for all of them: no worker answers a query (one crashed), or the server or the worker is
    working through a burst (thousands of jobs ending at once). Only for calls that are safe to
    repeat: a query, a describe, a cancel, a job index's ``cancelling`` mark."""

    def __init__(self, waiting: str, *, pause_s: float = 1.0) -> None:
        self.waiting = waiting
        self.pause_s = pause_s
        self._said = False

    async def send(self, call: Callable[[], Awaitable[T]]) -> T:
        from temporalio.service import RPCError, RPCStatusCode

        from skyhop.cli.output import info

        while True:
            try:
                return await call()
            except RPCError as exc:
                if exc.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                    raise
                if not self._said:
                    info(self.waiting)
                    self._said = True
            await asyncio.sleep(self.pause_s)
