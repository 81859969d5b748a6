"""Task files through the content store (claim check), end to end on moto's S3.

The CLI packs the workdir and file mounts into the bucket and the folder is deleted before the
worker syncs: the worker has only the store. The worker is killed while it fetches, the retried
activity finishes with one copy in its cache, a re-launch of the same tree uploads no blob, and an
``exec`` after one file changed uploads that one. The worker restarted after the kill writes the
jobs' logs to the bucket too, where the CLI reads them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from skyhop.providers.home import skyhop_home
from skyhop.storage.content import content_cache
from tests.conftest import skyhop
from tests.helpers import WorkerProcess
from tests.integration.support import launch_submitted, unique_cluster
from tests.providers.aws_support import reset
from tests.providers.conftest import moto

pytestmark = pytest.mark.integration

__all__ = ["moto"]


class S3Calls:
    """moto's S3, watched: blob PUTs counted (from each ``install``), one blob's GET held until released."""

    def __init__(self) -> None:
        self.blob_puts = 0
        self.hold: str | None = None
        self.held = threading.Event()
        self.release = threading.Event()

    @contextlib.contextmanager
    def install(self) -> Iterator[None]:
        from moto.s3.models import S3Backend

        put, get = S3Backend.put_object, S3Backend.get_object
        calls = self
        calls.blob_puts = 0

        def put_object(backend: Any, bucket: str, key: str, *args: Any, **kwargs: Any) -> Any:
            if "/blobs/" in key:
                calls.blob_puts += 1
            return put(backend, bucket, key, *args, **kwargs)

        def get_object(backend: Any, bucket: str, key: str, *args: Any, **kwargs: Any) -> Any:
            if calls.hold is not None and key.endswith(calls.hold):
                calls.held.set()
                calls.release.wait(120)
            return get(backend, bucket, key, *args, **kwargs)

        S3Backend.put_object = put_object  # type: ignore[method-assign]
        S3Backend.get_object = get_object  # type: ignore[method-assign]
        try:
            yield
        finally:
            calls.release.set()
            S3Backend.put_object = put  # type: ignore[method-assign]
            S3Backend.get_object = get  # type: ignore[method-assign]


def _write_tree(src: Path, big: bytes) -> None:
    (src / "wd").mkdir(parents=True)
    (src / "data" / "sub").mkdir(parents=True)
    (src / "wd" / "train.py").write_text("print('training')\n")
    (src / "wd" / ".gitignore").write_text("*.log\n")
    (src / "wd" / "run.log").write_text("ignored\n")
    (src / "wd" / "big.bin").write_bytes(big)
    (src / "data" / "a.txt").write_text("mounted a\n")
    (src / "data" / "sub" / "b.txt").write_text("mounted b\n")
    (src / "config.json").write_text('{"lr": 0.1}\n')


def _node_home(cluster: str) -> Path:
    (workdir,) = (skyhop_home() / "clusters" / cluster).glob("*/workdir")
    return workdir.parent


def test_a_worker_without_the_clis_folders_runs_the_task_from_s3_and_a_kill_mid_fetch_leaves_one_copy(
    live_worker: WorkerProcess, cli_env: dict[str, str], moto: str, tmp_path: Path
) -> None:
    reset(moto)
    bucket = f"skyhop-content-{uuid.uuid4().hex[:8]}"
    boto3.session.Session().client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
    env = {**cli_env, "SKYHOP_STORE_URL": f"s3://{bucket}/team"}
    src = tmp_path / "src"
    big = os.urandom(1 << 20)
    _write_tree(src, big)
    (tmp_path / "task.yaml").write_text(
        "resources: {infra: local}\n"
        "workdir: src/wd\n"
        "file_mounts: {~/data: src/data, ~/config.json: src/config.json}\n"
        "run: cat ~/workdir/train.py ~/data/a.txt ~/data/sub/b.txt ~/config.json\n"
    )
    cluster = unique_cluster()
    calls = S3Calls()
    try:
        with calls.install():
            live_worker.freeze()
            cli = launch_submitted(["-y", "-d", "-c", cluster, "task.yaml"], env, tmp_path)
            assert calls.blob_puts == 6  # train.py, .gitignore, big.bin, a.txt, b.txt, config.json
            shutil.rmtree(src)  # the worker cannot read the CLI's folders: only the store

            calls.hold = hashlib.sha256(big).hexdigest()
            live_worker.thaw()
            assert calls.held.wait(60), "the worker never fetched big.bin"
            (partial,) = content_cache().glob("*.partial")
            live_worker.kill9()
            calls.hold = None
            calls.release.set()
            live_worker.env = {"SKYHOP_STORE_URL": env["SKYHOP_STORE_URL"]}  # where it ships logs
            live_worker.start()
            out, err = cli.communicate(timeout=180)
            assert cli.returncode == 0, err[-2000:]

        digest = partial.name.removesuffix(".partial")
        assert sorted(p.name for p in content_cache().glob(f"{digest}*")) == [digest, f"{digest}.lock"]
        node = _node_home(cluster)
        assert (node / "workdir" / "big.bin").read_bytes() == big
        assert not (node / "workdir" / "run.log").exists()  # the .gitignore rules held
        assert (node / "data" / "sub" / "b.txt").read_text() == "mounted b\n"

        _write_tree(src, big)  # the same content, new mtimes: a new manifest, no new blob
        with calls.install():
            again = skyhop("launch", "-y", "-c", cluster, "task.yaml", env=env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr[-2000:]
        assert calls.blob_puts == 0
        assert "print('training')\nmounted a\nmounted b\n" in again.stdout
        assert "6 files, 0 new" in again.stderr

        (src / "wd" / "train.py").write_text("print('changed')\n")
        with calls.install():
            changed = skyhop("exec", cluster, "task.yaml", env=env, cwd=tmp_path)
        assert changed.returncode == 0, changed.stderr[-2000:]
        assert calls.blob_puts == 1  # exec packs the workdir only, and only what changed
        assert "print('changed')" in changed.stdout
    finally:
        skyhop("down", "-y", cluster, env=env)
        if live_worker.env:
            live_worker.stop()
            live_worker.env = {}
            live_worker.start()
