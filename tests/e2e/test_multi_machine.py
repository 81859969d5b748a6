"""A deployment that shares nothing but Temporal, the object store and the key (issue 14).

Machines are network namespaces on one bridge: a Temporal dev server bound to its machine's
address, moto's S3 as the store on another, two workers on two more, sshd hosts as the SSH pool's
nodes, and a "laptop" that runs only the CLI: a home of its own, and blackhole routes to the nodes
once ``ssh up`` has probed them, so anything it tried to do on them directly would fail. From the
laptop: ``ssh up``, a launch with a workdir and file mounts during whose sync the worker doing it
is killed (kill -9; the other one finishes it), ``logs``, ``exec``, ``queue``, ``down``. The
secrets it launched with reach the job and no file, log, history or display.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from skyhop.cli.client import connect
from skyhop.cli.config import TemporalConfig
from skyhop.contract import SearchAttribute
from tests.helpers import SKYHOP_CLI, DevServer, WorkerProcess, wait_for
from tests.netns import Bridge, Namespace, can_netns
from tests.security.test_secrets import contents, shown, workflows_of
from tests.ssh.conftest import pools_yaml
from tests.ssh.hosts import SSHHosts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not can_netns(), reason="the machines are network namespaces: needs root and ip netns"
    ),
]

KEY = base64.b64encode(os.urandom(32)).decode()
SYNC = "sync_workdir"
"""The activity a killed worker leaves half-done (the workdir's fetch from the store and rsync)."""


class Machine:
    """One test machine: its network namespace, and a home of its own (nothing shared with others)."""

    def __init__(self, bridge: Bridge, index: int, name: str, root: Path) -> None:
        self.name = name
        self.net: Namespace = bridge.add(index, f"skyhop-{bridge.tag}-{name}")
        self.home = root / name
        (self.home / ".skyhop").mkdir(parents=True)
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def address(self) -> str:
        return self.net.address

    def env(self, deployment: dict[str, str]) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "SKYHOP_HOME": str(self.home / ".skyhop"),
            "SKYHOP_HOST_ID": self.name,
            "AWS_EC2_METADATA_DISABLED": "true",
            **deployment,
        }

    def start(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.net.name, *argv], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


class Deployment:
    """Temporal, the store, two workers and a laptop, up for a ``with`` block, stopped by pid after."""

    def __init__(self, root: Path, nodes: SSHHosts) -> None:
        assert nodes.bridge is not None
        self.root, self.nodes = root, nodes
        bridge = nodes.bridge
        names = ("temporal", "store", "worker-a", "worker-b", "laptop")
        self.machines = {name: Machine(bridge, 20 + i, name, root) for i, name in enumerate(names)}
        self.bucket = f"skyhop-{uuid.uuid4().hex[:8]}"
        self.store_endpoint = f"http://{self.machines['store'].address}:5000"
        temporal = self.machines["temporal"]
        self.server = DevServer(temporal.home, ip=temporal.address, netns=temporal.net.name)
        self.workers: dict[str, WorkerProcess] = {}

    @property
    def shared(self) -> dict[str, str]:
        """All that the laptop and the workers have in common."""
        return {
            "SKYHOP_TEMPORAL_ADDRESS": self.server.address,
            "SKYHOP_KEY": KEY,
            "SKYHOP_STORE_URL": f"s3://{self.bucket}/content",
            "SKYHOP_STORE_ENDPOINT_URL": self.store_endpoint,
            "SKYHOP_STORE_ACCESS_KEY_ID": "testing",
            "SKYHOP_STORE_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    @contextlib.contextmanager
    def running(self) -> Iterator[Deployment]:
        try:
            self._start()
            yield self
        finally:
            for worker in self.workers.values():
                worker.stop()
            self.server.stop()
            for machine in self.machines.values():
                machine.stop()

    def _start(self) -> None:
        self.server.start()
        store = self.machines["store"]
        store.start(
            [sys.executable, "-m", "moto.server", "-H", store.address, "-p", "5000"], self.root / "moto.log"
        )
        s3 = boto3.client(
            "s3", endpoint_url=self.store_endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip

        def bucket_made() -> bool:
            with contextlib.suppress(Exception):
                s3.create_bucket(Bucket=self.bucket)
                return True
            return False

        wait_for(bucket_made, 60, "moto's S3 on the store machine")
        for name in ("worker-a", "worker-b"):
            machine = self.machines[name]
            worker = WorkerProcess(
                self.server.address, machine.home, netns=machine.net.name, env=machine.env(self.shared)
            )
            worker.start()
            self.workers[name] = worker

    def cut_laptop_from_nodes(self) -> None:
        """From now on the laptop reaches Temporal and the store, and no node."""
        laptop = self.machines["laptop"]
        for node in self.nodes.hosts:
            route = ["ip", "route", "add", "blackhole", f"{node.address}/32"]
            subprocess.run(["ip", "netns", "exec", laptop.net.name, *route], check=True)

    def cli(
        self, *args: str, timeout: float = 300, extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        laptop = self.machines["laptop"]
        return subprocess.run(
            ["ip", "netns", "exec", laptop.net.name, SKYHOP_CLI, *args],
            env={**laptop.env(self.shared), **(extra or {})}, cwd=laptop.home,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip


async def _kill_the_syncing_worker(deployment: Deployment, cluster: str) -> str:
    """Kill -9 the worker whose ``sync_workdir`` is under way for ``cluster``'s launch; its name."""
    client = await connect(TemporalConfig(key=KEY), deployment.server.address)
    pids = {w.proc.pid: name for name, w in deployment.workers.items() if w.proc is not None}
    deadline = asyncio.get_running_loop().time() + 120
    while asyncio.get_running_loop().time() < deadline:
        query = f"{SearchAttribute.CLUSTER.value} = '{cluster}' AND ExecutionStatus = 'Running'"
        async for execution in client.list_workflows(query):
            described = await client.get_workflow_handle(execution.id).describe()
            for pending in described.raw_description.pending_activities:
                identity = pending.last_worker_identity
                if pending.activity_type.name == SYNC and identity:
                    name = pids[int(identity.split("@")[0])]
                    deployment.workers[name].kill9()
                    return name
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker was seen running {SYNC} for {cluster}")


def test_a_laptop_with_only_temporal_and_the_store_runs_a_cluster_through_a_worker_crash(
    tmp_path: Path,
) -> None:
    (tmp_path / "sshd").mkdir()
    with (
        SSHHosts(tmp_path / "sshd", 2).running() as nodes,
        Deployment(tmp_path / "machines", nodes).running() as deployment,
    ):
        laptop = deployment.machines["laptop"].home
        key = laptop / ".ssh" / "id_pool"
        key.parent.mkdir()
        shutil.copy(nodes.key, key)
        pools_yaml(laptop / "pools.yaml", {"farm": nodes.hosts}, key)
        up = deployment.cli("ssh", "up", "pools.yaml")  # it probes the hosts from the laptop
        assert up.returncode == 0, up.stderr
        deployment.cut_laptop_from_nodes()

        # A workdir big enough that its sync is seen under way, and two file mounts.
        project = laptop / "project"
        (project / "many").mkdir(parents=True)
        for i in range(1500):
            (project / "many" / f"f{i}.txt").write_text(f"{i}\n")
        (project / "train.py").write_text("print('trained on the farm')\n")
        (laptop / "data").mkdir()
        (laptop / "data" / "a.txt").write_text("mounted a\n")
        (laptop / "config.json").write_text('{"lr": 0.1}\n')
        token, from_env = f"hf_{uuid.uuid4().hex}", f"sk_{uuid.uuid4().hex}"
        (laptop / "task.yaml").write_text(
            "resources: {infra: ssh/farm}\n"
            "num_nodes: 2\n"
            "workdir: project\n"
            "file_mounts: {~/data: data, ~/config.json: config.json}\n"
            "secrets: {HF_TOKEN: null, API_SECRET: null}\n"
            "run: |\n"
            "  python3 train.py; cat ~/data/a.txt ~/config.json; ls many | wc -l\n"
            '  [ "$HF_TOKEN $API_SECRET" = "' + f"{token} {from_env}" + '" ] && echo secrets-seen\n'
        )
        cluster = f"mm-{uuid.uuid4().hex[:6]}"
        laptop_machine = deployment.machines["laptop"]
        launch = subprocess.Popen(
            ["ip", "netns", "exec", laptop_machine.net.name, SKYHOP_CLI, "launch", "-y", "-c", cluster,
             "task.yaml", "--secret", f"HF_TOKEN={token}", "--secret", "API_SECRET"],
            env={**laptop_machine.env(deployment.shared), "API_SECRET": from_env}, cwd=laptop,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            killed = asyncio.run(_kill_the_syncing_worker(deployment, cluster))
            out, err = launch.communicate(timeout=600)
            assert launch.returncode == 0, err[-3000:]
            assert out.count("trained on the farm") == 2 and out.count("secrets-seen") == 2, out
            assert out.count("mounted a") == 2 and out.count("1500") == 2, out
            survivor = "worker-b" if killed == "worker-a" else "worker-a"
            assert (
                deployment.workers[survivor].proc is not None
                and deployment.workers[survivor].proc.poll() is None
            )

            logs = deployment.cli("logs", cluster, "1")
            assert logs.returncode == 0 and logs.stdout.count("trained on the farm") == 2, logs.stderr
            ran = deployment.cli("exec", cluster, "echo exec-on-$(hostname)")
            assert ran.returncode == 0, ran.stderr
            assert (
                "exec-on-node1" in ran.stdout.splitlines()
            )  # a command runs on the head node, as in SkyPilot
            queue = deployment.cli("queue", cluster, "-a")
            assert queue.returncode == 0 and queue.stdout.count("SUCCEEDED") == 2, queue.stdout + queue.stderr
            status = deployment.cli("status", "--json")
            assert status.returncode == 0 and cluster in status.stdout, status.stderr
            ids = workflows_of(deployment.server, cluster)
            histories = [shown(deployment.server, workflow_id) for workflow_id in ids]
        finally:
            if launch.poll() is None:
                launch.kill()
            down = deployment.cli("down", "-y", cluster)
        assert down.returncode == 0, down.stderr

        places = {
            "launch": out + err,
            "status --json": status.stdout + status.stderr,
            **{f"temporal workflow show {i}": text for i, text in zip(ids, histories, strict=True)},
            **{
                f"{name} log": (w.folder / "worker.log").read_text(errors="replace")
                for name, w in deployment.workers.items()
            },
        }
        database = sorted(deployment.server.db_file.parent.glob(deployment.server.db_file.name + "*"))
        assert database, "the dev server's SQLite files"
        for value in (token, from_env):
            assert [where for where, text in places.items() if value in text] == []
            assert [str(f) for f in database if value.encode() in contents(f)] == []
