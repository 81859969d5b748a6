"""Cloud resource names derived from cluster names, kept within each cloud's length limit.

A name must be the same on every retry (it is how a retried create finds what an earlier try
made), so a name too long is shortened deterministically, with a hash of the whole keeping it unique.
"""

from __future__ import annotations

import hashlib

__all__ = ["fit_name"]


def fit_name(name: str, limit: int, suffix: str = "") -> str:
    """``name + suffix`` if it fits in ``limit`` characters, else ``name`` cut, hashed, then ``suffix``."""
    if len(name + suffix) <= limit:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - len(suffix) - 9].rstrip('-')}-{digest}{suffix}"
