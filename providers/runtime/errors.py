"""Errors of the controller-side runtime (talking to nodes)."""

from __future__ import annotations

__all__ = ["NodeGoneError", "NodeUnreachableError"]


class NodeUnreachableError(ConnectionError):
    """A node did not answer: refused, timed out, or its connection dropped.

    Unlike a command that ran and failed, this says nothing about the job: the node may come back,
    so callers retry until their own deadline before they call the node lost.
    """


class NodeGoneError(NodeUnreachableError):
    """The node is known to be gone for good (its pod was evicted, OOM-killed or deleted): its
    jobs failed with it, so callers call it lost at once, with the provider's reason."""
