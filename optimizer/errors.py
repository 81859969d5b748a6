"""Errors of the optimizer."""

from __future__ import annotations

__all__ = ["NoFeasibleOfferingError"]


class NoFeasibleOfferingError(Exception):
    """No offering satisfies the request; the message says why and what comes close."""
