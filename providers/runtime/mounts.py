"""Unmounting whatever is mounted inside a folder, before the folder is removed.

A node that is a folder on this machine may have buckets mounted in it (``MOUNT``); removing the
folder with a mount inside would delete the bucket's objects through the mount. Whatever left
them mounted (a detach that failed, a worker that died), the folder's removal unmounts first.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["mounts_under", "unmount_under"]

_UNMOUNT = (["fusermount3", "-uz"], ["fusermount", "-uz"], ["umount", "-l"])


def mounts_under(folder: Path) -> list[Path]:
    """Mount points inside ``folder`` (deepest first), from this process's mount table."""
    root = folder.resolve()
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    # The fifth field is the mount point, with spaces and such octal-escaped (``\\040``).
    points = [Path(line.split()[4].encode().decode("unicode_escape")) for line in lines]
    inside = [point for point in points if point != root and point.is_relative_to(root)]
    return sorted(inside, key=lambda point: len(point.parts), reverse=True)


def unmount_under(folder: Path) -> None:
    """Lazily unmount every mount inside ``folder``; an unmount tool that is missing is skipped."""
    if not folder.exists():
        return
    for point in mounts_under(folder):
        for command in _UNMOUNT:
            try:
                done = subprocess.run([*command, os.fspath(point)], capture_output=True, check=False)
            except FileNotFoundError:
                continue
            if done.returncode == 0:
                break
