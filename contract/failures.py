"""How a skyhop failure reads: the sentence at the bottom of a Temporal failure chain.

Workflows record it (a job's error, a cluster's ``degraded``) and the CLI prints it, so both layers
read a chain the same way from here.
"""

from __future__ import annotations

__all__ = ["innermost_message"]


def innermost_message(exc: BaseException) -> str:
    """The reason at the bottom of a workflow/activity/update failure chain, as a bare sentence.

    A failure's ``message`` is the sentence alone; ``str()`` would prefix its error type.
    """
    while getattr(exc, "cause", None) is not None:
        exc = exc.cause  # type: ignore[attr-defined]
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)
