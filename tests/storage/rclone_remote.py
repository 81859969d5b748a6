"""rclone, as the nodes run it, on a store's ``rclone_config()`` passed the way nodes get it: in the
environment as ``RCLONE_CONFIG_<REMOTE>_<OPTION>``, with no config file."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

import pytest

__all__ = ["needs_rclone", "rclone"]

needs_rclone = pytest.mark.skipif(
    shutil.which("rclone") is None, reason="nodes mount buckets with Debian's rclone: apt-get install rclone"
)


def rclone(options: Mapping[str, str], *args: str) -> str:
    """Run ``rclone ARGS`` with ``options`` as the remote ``store:``; its output, or the test fails."""
    env = {**os.environ, "RCLONE_CONFIG": os.devnull}
    env.update({f"RCLONE_CONFIG_STORE_{name.upper()}": value for name, value in options.items()})
    done = subprocess.run(
        ["rclone", "--retries", "1", "--low-level-retries", "1", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"rclone {' '.join(args)}: {done.stderr}"
    return done.stdout
