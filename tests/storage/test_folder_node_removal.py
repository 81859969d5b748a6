"""Removing a folder node never deletes a bucket's objects through a mount left inside it.

A mount is left behind when its unmount never ran (a worker died between mount and down, a
detach that failed); the folder's removal must unmount first, or ``rmtree`` walks into the mount.
The bucket here is a local folder mounted by rclone: the same FUSE mount, no S3 needed.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from skyhop.providers.base import ProvisionRequest
from skyhop.providers.local import LocalProvider
from skyhop.providers.runtime.mounts import mounts_under
from tests.conftest import run
from tests.helpers import wait_for


def _mount(source: Path, target: Path) -> subprocess.Popen[bytes]:
    target.mkdir(parents=True)
    proc = subprocess.Popen(["rclone", "mount", str(source), str(target)], stderr=subprocess.DEVNULL)
    wait_for(lambda: subprocess.run(["mountpoint", "-q", str(target)]).returncode == 0, what="the mount")
    return proc


@pytest.mark.parametrize("depth", ["mnt", "deep/er/mnt"])
def test_terminate_unmounts_before_it_removes_the_folder(tmp_path: Path, depth: str) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (bucket / "precious.bin").write_bytes(b"the user's data")
    provider = LocalProvider()
    cluster = f"mounted-{uuid.uuid4().hex[:6]}"
    handle = run(provider.launch(ProvisionRequest(cluster_name=cluster, offering=provider.offerings()[0])))
    node = Path(handle.nodes[0].runtime_dir)
    rclone = _mount(bucket, node / depth)
    try:
        assert (node / depth / "precious.bin").exists()
        run(provider.terminate(handle))
        assert (bucket / "precious.bin").read_bytes() == b"the user's data"
        assert not node.exists()
        assert mounts_under(tmp_path) == [] and mounts_under(node.parent) == []
        rclone.wait(timeout=30)  # unmounted, rclone ends by itself
    finally:
        if rclone.poll() is None:
            subprocess.run(["fusermount3", "-uz", str(node / depth)], check=False)
            rclone.kill()
