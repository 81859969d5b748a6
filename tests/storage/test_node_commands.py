"""The node's storage jobs on their own, as ``activities.storage`` runs them: on a ``local`` node,
through its node runner and the storage tool installed beside it.

The bucket is a local folder behind an rclone ``local`` remote (the same copy and FUSE mounts as
over S3, no S3 needed), so names a shell would mangle can be tried fast.
"""

from __future__ import annotations

import http.server
import os
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from skyhop.providers.base import NodeHandle, ProvisionRequest
from skyhop.providers.local import LocalProvider
from skyhop.providers.runtime.jobs import JobSpec, NodeJobState
from skyhop.providers.runtime.mounts import mounts_under, unmount_under
from skyhop.spec.storage import BucketRef, StorageMode, StoreKind
from skyhop.storage.node_commands import ATTACH_SCRIPT, DETACH_SCRIPT, attach_env, tool_env, with_flush
from skyhop.storage.plan import MountPlan
from tests.conftest import run
from tests.helpers import wait_for
from tests.storage.rclone_remote import needs_rclone

_LOCAL_REMOTE = {"RCLONE_CONFIG_SKYHOPS3_TYPE": "local"}
"""The s3 remote the tool uses, as a local folder: ``skyhops3:/path/of/bucket``."""


@pytest.fixture
def node() -> Iterator[NodeHandle]:
    provider = LocalProvider()
    cluster = f"storage-{uuid.uuid4().hex[:6]}"
    handle = run(provider.launch(ProvisionRequest(cluster_name=cluster, offering=provider.offerings()[0])))
    try:
        yield handle.nodes[0]
    finally:
        unmount_under(Path(handle.nodes[0].runtime_dir))
        run(provider.terminate(handle))


def _job(node: NodeHandle, script: str, env: dict[str, str]) -> tuple[NodeJobState, str]:
    """Run ``script`` as a node job and wait for its end; its state and log."""
    runtime = LocalProvider().runtime(node)
    key = f"storage-{uuid.uuid4().hex[:8]}"
    run(runtime.start_job(JobSpec(key=key, script=script, env=env)))
    states: list[NodeJobState | None] = [None]

    def done() -> bool:
        states[0] = run(runtime.job_state(key))
        return states[0] is not None and states[0].done

    wait_for(done, 60, f"node job {key}")
    assert states[0] is not None
    return states[0], run(runtime.read_log(key, 0)).decode(errors="replace")


def _bucket_plan(target: str, mode: StorageMode, bucket: Path, prefix: str = "") -> MountPlan:
    return MountPlan(
        target=target, mode=mode, bucket=BucketRef(store=StoreKind.S3, bucket=str(bucket), prefix=prefix)
    )


@needs_rclone
def test_names_a_shell_would_split_or_run_copy_mount_flush_and_unmount(
    node: NodeHandle, tmp_path: Path
) -> None:
    """Spaces (a trailing one too), quotes and ``$(...)`` in targets and prefixes are only names."""
    home = Path(node.runtime_dir)
    bucket = tmp_path / "bucket"
    (bucket / "sub 'dir' $(touch pwned)").mkdir(parents=True)
    (bucket / "sub 'dir' $(touch pwned)" / "a.txt").write_text("alpha")
    (bucket / "one file.bin").write_bytes(b"\x00" * 1000)
    (bucket / "mnt").mkdir()
    (bucket / "ckpt").mkdir()
    plans = [
        _bucket_plan('~/copied "it\'s" $(touch pwned)', StorageMode.COPY, bucket, "sub 'dir' $(touch pwned)"),
        _bucket_plan("~/single `file`", StorageMode.COPY, bucket, "one file.bin"),
        _bucket_plan("~/mnt ", StorageMode.MOUNT, bucket / "mnt"),
        _bucket_plan("~/ck;pt", StorageMode.MOUNT_CACHED, bucket / "ckpt"),
    ]
    state, log = _job(node, ATTACH_SCRIPT, {**_LOCAL_REMOTE, **attach_env(node, plans)})
    assert state.exit_code == 0, log
    assert (home / 'copied "it\'s" $(touch pwned)' / "a.txt").read_text() == "alpha"
    assert (home / "single `file`").read_bytes() == b"\x00" * 1000
    assert sorted(mounts_under(home)) == [home / "ck;pt", home / "mnt "]

    write = "head -c 3000000 /dev/urandom > ~/'ck;pt'/model.ckpt; exit 3"
    flushed, log = _job(node, with_flush(write), {**_LOCAL_REMOTE, **tool_env(node)})
    assert flushed.exit_code == 3, log  # the job's own exit code is kept
    assert (bucket / "ckpt" / "model.ckpt").stat().st_size == 3_000_000  # uploaded before "done"

    detached, log = _job(node, DETACH_SCRIPT, {**_LOCAL_REMOTE, **tool_env(node)})
    assert detached.exit_code == 0, log
    assert mounts_under(home) == []
    assert not list(tmp_path.rglob("pwned")) and not list(home.rglob("pwned"))


@needs_rclone
def test_a_mount_that_fails_names_its_bucket_and_rclone_s_reason(node: NodeHandle, tmp_path: Path) -> None:
    plan = _bucket_plan("~/m", StorageMode.MOUNT, tmp_path / "bucket")
    env = {**attach_env(node, [plan]), "RCLONE_CONFIG_SKYHOPS3_TYPE": "no-such-backend"}
    state, log = _job(node, ATTACH_SCRIPT, env)
    assert state.exit_code == 1
    assert f"skyhop: mounting s3://{tmp_path / 'bucket'} failed:" in log
    assert "no-such-backend" in log


@pytest.fixture
def https_files(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTPS server of a folder, with a self-signed certificate; its URL and the cert."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    served = tmp_path / "served"
    served.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    (served / "weights.bin").write_bytes(b"w" * 100_000)
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


@needs_rclone
def test_an_https_file_lands_at_its_target(https_files: tuple[str, Path], node: NodeHandle) -> None:
    url, cert = https_files
    plan = MountPlan(target="~/models/w.bin", mode=StorageMode.COPY, url=f"{url}/weights.bin")
    env = {**attach_env(node, [plan]), "SSL_CERT_FILE": str(cert)}
    if "AWS_CA_BUNDLE" in os.environ:
        env["AWS_CA_BUNDLE"] = ""
    state, log = _job(node, ATTACH_SCRIPT, env)
    assert state.exit_code == 0, log
    assert (Path(node.runtime_dir) / "models" / "w.bin").read_bytes() == b"w" * 100_000
