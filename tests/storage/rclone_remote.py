"""rclone, as the nodes run it, on a store's ``rclone_config()`` passed the way nodes get it: in the
environment as ``RCLONE_CONFIG_<REMOTE>_<OPTION>``, with no config file."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from skyhop.storage.stores import BucketStore

__all__ = ["check_rclone_round_trip", "needs_rclone", "rclone", "sample_tree"]

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


def sample_tree(root: Path) -> Path:
    """A folder to upload: a text file and a binary one in a subfolder."""
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.bin").write_bytes(bytes(range(256)) * 10)
    return root


def check_rclone_round_trip(store: BucketStore, tmp_path: Path) -> None:
    """What a node does with the remote ``store.rclone_config()`` describes: list, read, COPY down,
    and write a checkpoint to ``data-1/out/ckpt.pt`` (the caller checks the fake holds it)."""
    store.create("data-1", None, {})
    store.upload(sample_tree(tmp_path / "src"), "data-1", "in")
    options = store.rclone_config()
    assert sorted(rclone(options, "lsf", "-R", "store:data-1").split()) == [
        "in/",
        "in/a.txt",
        "in/sub/",
        "in/sub/b.bin",
    ]
    assert rclone(options, "cat", "store:data-1/in/a.txt") == "alpha"
    assert '"IsDir":false' in rclone(options, "lsjson", "--stat", "store:data-1/in/a.txt").replace(" ", "")
    rclone(options, "copy", "store:data-1/in", str(tmp_path / "copied"))  # a COPY mount
    assert (tmp_path / "copied" / "sub" / "b.bin").read_bytes() == bytes(range(256)) * 10
    (tmp_path / "ckpt.pt").write_bytes(b"weights")
    rclone(options, "copyto", str(tmp_path / "ckpt.pt"), "store:data-1/out/ckpt.pt")
