"""The ssh provider against real sshd hosts: exclusive hosts, the runtime, workdir sync, detached jobs;
and a cloud instance's runtime, which installs the node programs itself."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from skyhop.providers.base import ClusterHandle, NodeHandle, Offering, ProvisionRequest, SshAccess
from skyhop.providers.cloud_ssh import CloudNodeRuntime
from skyhop.providers.errors import CapacityError
from skyhop.providers.runtime.jobs import JobSpec, NodeJobState
from skyhop.providers.ssh import SSHProvider
from skyhop.providers.ssh.connection import Endpoint, close_connections
from skyhop.providers.ssh.deployment import fetch_inventory
from skyhop.providers.ssh.runtime import SSHNodeRuntime, runtime_dir
from tests.conftest import run
from tests.integration.support import unique_cluster
from tests.ssh.hosts import SSHHosts

T = TypeVar("T")


def _plain(pool: str) -> Offering:
    """The offering of the pool's hosts without GPUs."""
    return next(o for o in SSHProvider().offerings() if o.region == pool and not o.accelerators)


def with_cluster(pool: str, nodes: int, body: Callable[[ClusterHandle], Awaitable[T]], name: str) -> T:
    """Provision a cluster on the pool, run ``body``, always terminate it."""

    async def scenario() -> T:
        provider = SSHProvider()
        await provider.load()
        handle = await provider.launch(
            ProvisionRequest(cluster_name=name, offering=_plain(pool), num_nodes=nodes)
        )
        try:
            return await body(handle)
        finally:
            await provider.terminate(handle)
            await close_connections()

    return run(scenario())


async def _wait_done(rt: SSHNodeRuntime, key: str, timeout: float = 20) -> NodeJobState:
    for _ in range(int(timeout / 0.1)):
        state = await rt.job_state(key)
        if state is not None and state.done:
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {key} did not end")


def test_offerings_are_the_pools_host_shapes(ssh_hosts: SSHHosts, lab_pool: str) -> None:
    run(SSHProvider().load())
    offerings = [o for o in SSHProvider().offerings() if o.region == lab_pool]
    assert all(o.provider == "ssh" and o.price == 0 for o in offerings)
    plain = _plain(lab_pool)
    assert plain.cpus == os.cpu_count() and plain.instance_type.startswith(f"{os.cpu_count()}CPU--")
    if not ssh_hosts.loopback:
        gpu = next(o for o in offerings if o.accelerators)
        assert gpu.accelerators == {"A100-80GB": 2.0} and gpu.instance_type.endswith("--A100-80GB:2")


def test_a_cluster_holds_its_hosts_exclusively_until_terminated(ssh_hosts: SSHHosts, lab_pool: str) -> None:
    plain = ssh_hosts.hosts if ssh_hosts.loopback else ssh_hosts.hosts[:2]  # node3 has GPUs in netns mode

    async def body(handle: ClusterHandle) -> None:
        assert [(n.rank, n.ip) for n in handle.nodes] == [(r, h.address) for r, h in enumerate(plain)]
        assert (await fetch_inventory()).held_by("held-a").keys() == set(range(len(plain)))
        # The pool's plain hosts are all taken: a second cluster cannot have one.
        with pytest.raises(CapacityError, match="0 free host.*held by: held-a"):
            await SSHProvider().launch(
                ProvisionRequest(cluster_name="held-b", offering=_plain(lab_pool), num_nodes=1)
            )
        # A retried provision of the same cluster gets the same hosts back, and creates nothing.
        again = await SSHProvider().launch(
            ProvisionRequest(cluster_name="held-a", offering=_plain(lab_pool), num_nodes=len(plain))
        )
        assert again.nodes == handle.nodes

    with_cluster(lab_pool, len(plain), body, "held-a")
    after = run(fetch_inventory())
    assert after.held_by("held-a") == {} and after.held_by("held-b") == {}


def test_jobs_run_detached_and_outlive_the_connection(lab_pool: str) -> None:
    async def body(handle: ClusterHandle) -> None:
        rt = SSHProvider().runtime(handle.nodes[0])
        spec = JobSpec(
            key="job-1", script='echo "start $GREETING"; sleep 1; echo "end $(pwd)"', env={"GREETING": "hi"}
        )
        await rt.start_job(spec)
        await rt.start_job(spec)  # idempotent: still one run
        await close_connections()  # the SSH connection that started it is gone
        state = await _wait_done(rt, "job-1")
        assert state.status == "SUCCEEDED" and state.exit_code == 0
        log = await rt.read_log("job-1", 0)
        assert log == f"start hi\nend {handle.nodes[0].runtime_dir}/jobs/job-1\n".encode()
        assert await rt.read_log("job-1", 6) == log[6:]
        assert await rt.job_state("never-started") is None

    with_cluster(lab_pool, 1, body, "detached")


def test_a_cloud_nodes_first_job_installs_the_node_programs(ssh_hosts: SSHHosts) -> None:
    """A cloud instance comes up bare (nothing installs the node runner at launch)."""
    host = ssh_hosts.hosts[0]
    folder = runtime_dir("/root", unique_cluster("bare"), 0)
    node = NodeHandle(
        rank=0, instance_id="i-bare", ip=host.address, access=SshAccess(user="root"), runtime_dir=folder
    )
    endpoint = Endpoint(address=host.address, port=host.port, user="root", identity_file=str(ssh_hosts.key))
    rt = CloudNodeRuntime(node, endpoint, home="/root", has_rsync=True)

    async def scenario() -> None:
        try:
            assert (await rt.run(f"test -e {folder}")).exit_status == 1
            await rt.start_job(JobSpec(key="job-1", script="echo ran"))
            state = await _wait_done(rt, "job-1")
            assert state.status == "SUCCEEDED" and await rt.read_log("job-1", 0) == b"ran\n"
        finally:
            await rt.clean()
            await close_connections()

    run(scenario())


def test_cancel_stops_the_job(lab_pool: str) -> None:
    async def body(handle: ClusterHandle) -> None:
        rt = SSHProvider().runtime(handle.nodes[0])
        await rt.start_job(JobSpec(key="job-1", script="echo up; sleep 60"))
        while await rt.read_log("job-1", 0) != b"up\n":
            await asyncio.sleep(0.05)
        await rt.cancel_job("job-1")
        assert (await _wait_done(rt, "job-1", 5)).status == "CANCELLED"

    with_cluster(lab_pool, 1, body, "cancelling")


def _workdir(root: Path) -> Path:
    """A tree of 1000 small files, plus files each ignore rule must keep out."""
    for i in range(1000):
        folder = root / f"d{i % 20}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"file {i}\n")
    (root / ".gitignore").write_text("*.log\n/build/\n")
    (root / "app.log").write_text("ignored\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_text("ignored\n")
    (root / "d0" / ".gitignore").write_text("secret.txt\n")
    (root / "d0" / "secret.txt").write_text("ignored\n")
    (root / "d1" / "secret.txt").write_text("kept: the rule is d0's\n")
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("*.tmp\n")
    (root / "x.tmp").write_text("ignored\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


async def _remote_files(rt: SSHNodeRuntime, folder: str) -> set[str]:
    from skyhop.providers.ssh.connection import run as ssh_run

    out = await ssh_run(rt.endpoint, f"cd {folder} && find . -type f")
    return {line[2:] for line in out.stdout.decode().split()}


@pytest.mark.parametrize("transport", ["rsync", "sftp"])
def test_workdir_sync_honours_ignore_rules_on_a_1000_file_tree(
    lab_pool: str, tmp_path: Path, transport: str
) -> None:
    workdir = _workdir(tmp_path / "wd")

    async def body(handle: ClusterHandle) -> None:
        rt = SSHProvider().runtime(handle.nodes[0])
        await rt.login()
        assert rt.has_rsync
        rt.has_rsync = transport == "rsync"
        await rt.sync_dir(str(workdir), "workdir")
        remote = f"{handle.nodes[0].runtime_dir}/workdir"
        files = await _remote_files(rt, remote)
        assert len([f for f in files if f.endswith(".txt") and "/f" in f]) == 1000
        assert {"d1/secret.txt", ".gitignore", "d0/.gitignore", ".git/HEAD"} <= files
        assert not {"app.log", "build/out.bin", "d0/secret.txt", "x.tmp"} & files
        # .skyhopignore replaces the git rules.
        (workdir / ".skyhopignore").write_text("d1/\n")
        await rt.sync_dir(str(workdir), "workdir2")
        files = await _remote_files(rt, f"{handle.nodes[0].runtime_dir}/workdir2")
        assert "app.log" in files and "d0/secret.txt" in files and not any(f.startswith("d1/") for f in files)
        # A re-sync sends only what changed.
        (workdir / "d2" / "f2.txt").write_text("changed\n")
        await rt.sync_dir(str(workdir), "workdir")
        from skyhop.providers.ssh.connection import run as ssh_run

        out = await ssh_run(rt.endpoint, f"cat {remote}/d2/f2.txt")
        assert out.stdout == b"changed\n"
        # A same-size rewrite in the second of the last sync is still sent (a git checkout at
        # another ref does this); rsync compares nanoseconds, SFTP re-sends files that young.
        (workdir / "d2" / "f2.txt").write_text("updated\n")
        await rt.sync_dir(str(workdir), "workdir")
        out = await ssh_run(rt.endpoint, f"cat {remote}/d2/f2.txt")
        assert out.stdout == b"updated\n"
        if transport == "rsync":
            second = int(os.stat(workdir / "d2" / "f2.txt").st_mtime) * 10**9
            for text, offset in ((b"first\n", 100), (b"later\n", 900)):
                (workdir / "d3.txt").write_bytes(text)
                os.utime(workdir / "d3.txt", ns=(second + offset * 10**6, second + offset * 10**6))
                await rt.sync_dir(str(workdir), "workdir")
            out = await ssh_run(rt.endpoint, f"cat {remote}/d3.txt")
            assert out.stdout == b"later\n"

    with_cluster(lab_pool, 1, body, f"sync-{transport}")
