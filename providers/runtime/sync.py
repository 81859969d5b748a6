"""How a workdir is copied: rsync with the same ignore rules everywhere."""

from __future__ import annotations

import os
import shutil

__all__ = ["rsync_command"]

IGNORE_FILE = ".skyhopignore"
"""Like SkyPilot's ``.skyignore``: when present it replaces the ``.gitignore`` rules."""


def rsync_command(local_dir: str, dest: str, shell: str | None = None) -> list[str] | None:
    """The rsync argv copying ``local_dir`` into ``dest``, or None when rsync is not installed."""
    rsync = shutil.which("rsync")
    if rsync is None:
        return None
    command = [rsync, "-a"]
    if os.path.exists(os.path.join(local_dir, IGNORE_FILE)):
        command.append(f"--exclude-from={os.path.join(local_dir, IGNORE_FILE)}")
    else:
        command += ["--filter=:- .gitignore"]
    if shell is not None:
        command += ["-e", shell]
    return [*command, local_dir.rstrip("/") + "/", dest]
