"""How a skyhop failure reads: the sentence at the bottom of a Temporal failure chain.

Workflows record it (a job's error, a cluster's ``degraded``) and the CLI prints it, so both layers
read a chain the same way from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from temporalio.client import WorkflowUpdateFailedError

__all__ = ["innermost_message", "is_unprocessed_update"]

_UNPROCESSED_UPDATE = "UnprocessedUpdate"
"""The failure type Temporal's server gives an update that a completed workflow task left unrun."""


def innermost_message(exc: BaseException) -> str:
    """The reason at the bottom of a workflow/activity/update failure chain, as a bare sentence.

    A failure's ``message`` is the sentence alone; ``str()`` would prefix its error type.
    """
    while getattr(exc, "cause", None) is not None:
        exc = exc.cause  # type: ignore[attr-defined]
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def is_unprocessed_update(exc: WorkflowUpdateFailedError) -> bool:
    """Whether the server rejected the update because the worker's task did not run it.

    A worker restarted mid-burst can complete a task without running an update the server put in
    it (temporalio/sdk-python#848). The workflow never ran the handler, so sending it again is safe.
    """
    from temporalio.exceptions import ApplicationError

    return isinstance(exc.cause, ApplicationError) and exc.cause.type == _UNPROCESSED_UPDATE
