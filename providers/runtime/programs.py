"""The standard-library programs every node gets in its runtime folder (``NodeRuntime.prepare``):
the job runner, and the storage tool its storage jobs run."""

from __future__ import annotations

import hashlib
from pathlib import Path

from skyhop.providers.runtime import node_runner, node_storage

__all__ = ["NODE_PROGRAMS", "program_hashes"]

NODE_PROGRAMS: dict[str, bytes] = {
    Path(module.__file__ or "").name: Path(module.__file__ or "").read_bytes()
    for module in (node_runner, node_storage)
}
"""File name in the runtime folder -> its content."""


def program_hashes() -> dict[str, str]:
    """Each program's sha256, as ``sha256sum`` prints it."""
    return {name: hashlib.sha256(source).hexdigest() for name, source in NODE_PROGRAMS.items()}
