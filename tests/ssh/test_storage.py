"""Bucket storage on an SSH-pool node: the storage tool is installed beside the node runner over
SSH, COPY downloads to the node, MOUNT writes through to the bucket, and ``down`` unmounts and
deletes the buckets skyhop created.

The buckets are on moto, listening where the node can reach it: on the test network's gateway
(the bridge's root-namespace address) in namespace mode, on loopback otherwise.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import boto3
import pytest

from tests.conftest import skyhop
from tests.helpers import WorkerProcess, wait_for
from tests.integration.support import unique_cluster
from tests.providers.aws_support import moto_server
from tests.ssh.hosts import SSHHosts

pytestmark = pytest.mark.integration


def test_copy_and_mount_on_an_ssh_node(
    ssh_hosts: SSHHosts, lab_pool: str, cli_env: dict[str, str], live_worker: WorkerProcess, tmp_path: Path
) -> None:
    address = ssh_hosts.bridge.gateway if ssh_hosts.bridge is not None else "127.0.0.1"
    tag = uuid.uuid4().hex[:8]
    copied, mounted = f"skyhop-ssh-copy-{tag}", f"skyhop-ssh-mount-{tag}"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("copied to the ssh node")
    (tmp_path / "task.yaml").write_text(
        "file_mounts:\n"
        f"  ~/copied: {{name: {copied}, source: ./data, mode: COPY, persistent: false}}\n"
        f"  ~/mnt: {{name: {mounted}, mode: MOUNT, persistent: false}}\n"
        "run: cat ~/copied/a.txt; echo; echo written-on-$(hostname) > ~/mnt/out.txt\n"
    )
    cluster = unique_cluster("ssh")
    with moto_server(Path(os.environ["HOME"]), address):
        s3 = boto3.session.Session().client("s3", region_name="us-east-1")
        launch = ["launch", "-y", "-c", cluster, "--infra", f"ssh/{lab_pool}", "task.yaml"]
        try:
            out = skyhop(*launch, env=cli_env, cwd=tmp_path, timeout=300)
            assert out.returncode == 0, out.stderr[-3000:]
            assert "copied to the ssh node" in out.stdout

            def written() -> bytes | None:
                objects = s3.list_objects_v2(Bucket=mounted).get("Contents", [])
                if not any(o["Key"] == "out.txt" for o in objects):
                    return None
                body: bytes = s3.get_object(Bucket=mounted, Key="out.txt")["Body"].read()
                return body

            wait_for(written, 60, "the job's file in the MOUNT bucket")
            assert (written() or b"").startswith(b"written-on-")
        finally:
            down = skyhop("down", "-y", cluster, env=cli_env, timeout=300)
        assert down.returncode == 0, down.stderr[-2000:]
        assert {b["Name"] for b in s3.list_buckets()["Buckets"]} == set()
