"""How a workdir is copied: rsync with the same ignore rules everywhere, as SkyPilot does.

``.skyhopignore`` at the top of the folder (like SkyPilot's ``.skyignore``) replaces the git
rules; otherwise every ``.gitignore`` in the tree applies to its own folder, plus
``.git/info/exclude``. ``.git`` itself is copied. Where rsync cannot run on the far side, the
same rules pick the files (``list_files``), so both paths copy exactly the same tree.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile

__all__ = ["IGNORE_FILE", "RSYNC_COPY", "list_files", "rsync_command", "rsync_filters"]

IGNORE_FILE = ".skyhopignore"
"""Like SkyPilot's ``.skyignore``: when present it replaces the ``.gitignore`` rules."""


RSYNC_COPY = ["-a", "--modify-window=-1"]
"""Archive mode, and a file counts as unchanged only if its mtime matches to the nanosecond.

rsync's default compares whole seconds, so a same-size file rewritten within the second of the
last sync (a git checkout at another ref, an editor's quick save) would be skipped.
"""


def rsync_filters(local_dir: str) -> list[str]:
    """The rsync options that apply the folder's ignore rules."""
    own = os.path.join(local_dir, IGNORE_FILE)
    if os.path.exists(own):
        return [f"--exclude-from={own}"]
    options = ["--filter=:- .gitignore"]
    git_exclude = os.path.join(local_dir, ".git", "info", "exclude")
    if os.path.exists(git_exclude):
        options.append(f"--exclude-from={git_exclude}")
    return options


def rsync_command(local_dir: str, dest: str, shell: str | None = None) -> list[str] | None:
    """The rsync argv copying ``local_dir`` into ``dest``, or None when rsync is not installed."""
    rsync = shutil.which("rsync")
    if rsync is None:
        return None
    command = [rsync, *RSYNC_COPY, *rsync_filters(local_dir)]
    if shell is not None:
        command += ["-e", shell]
    return [*command, local_dir.rstrip("/") + "/", dest]


async def list_files(local_dir: str) -> list[str]:
    """Paths under ``local_dir`` that a sync copies, relative to it, folders ending in ``/``.

    Asks rsync itself (a dry run into an empty folder), so the rules are rsync's, byte for byte.
    """
    with tempfile.TemporaryDirectory(prefix="skyhop-list-") as empty:
        command = rsync_command(local_dir, empty)
        if command is None:
            raise OSError("rsync is not installed on this machine; it picks the files a sync copies")
        proc = await asyncio.create_subprocess_exec(
            command[0], "--dry-run", "--out-format=%n", *command[1:],
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
    if proc.returncode != 0:
        raise OSError(f"listing {local_dir} failed: {err.decode(errors='replace').strip()}")
    return [name for name in out.decode().splitlines() if name and name != "./"]
