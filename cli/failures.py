"""What a Temporal failure means to the user, decided in one place for every command."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from temporalio.service import RPCError

__all__ = ["innermost_message", "is_not_found"]


def innermost_message(exc: BaseException) -> str:
    """The reason at the bottom of a workflow/activity/update failure chain, as a bare sentence.

    A failure's ``message`` is the sentence alone; ``str()`` would prefix its error type.
    """
    while getattr(exc, "cause", None) is not None:
        exc = exc.cause  # type: ignore[attr-defined]
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def is_not_found(exc: RPCError) -> bool:
    """Whether Temporal answered that the workflow does not exist or has ended (a cluster that is gone)."""
    from temporalio.service import RPCStatusCode

    return exc.status == RPCStatusCode.NOT_FOUND
