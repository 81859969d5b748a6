"""Removing a folder node never deletes a bucket's objects through a mount left inside it, and
leaves nothing of the cluster behind.

A mount is left behind when its unmount never ran (a worker died between mount and down, a
detach that failed); the folder's removal must unmount first, or ``rmtree`` walks into the mount.
The bucket here is a local folder mounted by rclone: the same FUSE mount, no S3 needed.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
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


def test_terminate_leaves_no_folder_while_a_dying_job_still_writes_into_it() -> None:
    """A killed job's waiting shell writes its exit code into the job's folder as it ends: while
    the cluster's folder was being removed, that write left the job's folder, and so the cluster's,
    behind (a replica scaled down, its cluster still listed on disk)."""
    provider = LocalProvider()
    cluster = f"dying-{uuid.uuid4().hex[:6]}"
    handle = run(provider.launch(ProvisionRequest(cluster_name=cluster, offering=provider.offerings()[0])))
    job = Path(handle.nodes[0].runtime_dir) / "jobs" / "job-1"
    job.mkdir(parents=True)
    for i in range(200):  # a folder whose removal takes a while, as a job's logs make it
        (job / f"log-{i}").write_text("output")
    done = threading.Event()

    def waiter_writes_its_exit_code() -> None:
        while not done.is_set():
            # Once the folder is gone the shell's write fails, as on a removed machine.
            with contextlib.suppress(FileNotFoundError):
                (job / "exit").write_text("137")

    writer = threading.Thread(target=waiter_writes_its_exit_code)
    writer.start()
    try:
        run(provider.terminate(handle))
    finally:
        done.set()
        writer.join()
    clusters = job.parents[3]
    assert [p.name for p in clusters.iterdir() if cluster in p.name] == []
