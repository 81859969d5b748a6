"""Errors of the controller-side runtime (talking to nodes)."""

from __future__ import annotations

__all__ = ["NodeUnreachableError"]


class NodeUnreachableError(ConnectionError):
    """A node did not answer: refused, timed out, or its connection dropped.

    Unlike a command that ran and failed, this says nothing about the job: the node may come back,
    so callers retry until their own deadline before they call the node lost.
    """
