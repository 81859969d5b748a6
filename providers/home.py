"""skyhop's state folder on this machine: ``$SKYHOP_HOME``, else ``~/.skyhop``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["skyhop_home"]


def skyhop_home() -> Path:
    """The folder that holds config, the embedded server's files and local clusters."""
    return Path(os.environ.get("SKYHOP_HOME") or Path.home() / ".skyhop").expanduser()
