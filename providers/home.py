"""skyhop's state folder on this machine: ``$SKYHOP_HOME``, else ``~/.skyhop``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["host_id", "private_dir", "skyhop_home"]


def skyhop_home() -> Path:
    """The folder that holds config, the embedded server's files and local clusters."""
    return Path(os.environ.get("SKYHOP_HOME") or Path.home() / ".skyhop").expanduser()


def host_id() -> str:
    """This machine's name among the deployment's workers: ``SKYHOP_HOST_ID``, else the host name.

    ``local`` clusters are folders on one machine; their activities go to the task queues of the
    worker with this id (``contract.host_queue``). Give each worker of one machine the same id and
    each machine a different one (containers of one host that share ``~/.skyhop``: the same).
    """
    import socket

    return os.environ.get("SKYHOP_HOST_ID") or socket.gethostname()


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can enter (0700), created if needed.

    skyhop's state holds the payload key, Temporal's database and job specs with env values: a
    private folder protects all of it, whatever mode a file below it was created with.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path
